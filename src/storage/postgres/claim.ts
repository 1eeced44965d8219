import type pg from 'pg'
import type { Claim } from '../claim.js'

/** A claim on PostgreSQL, whose transactions live on one connection: taken and completed on the writer's. */
export interface PostgresClaim<Result, Held> {
  /** `BEGIN` with any `SET LOCAL` the claim's waits need: one round trip. */
  readonly begin: string
  take(client: pg.PoolClient): Promise<Held | undefined>
  complete(client: pg.PoolClient, result: Result): Promise<void>
  /** After the rollback: who holds the claim when `error` means so (a wait for the holder ran out), else undefined. */
  heldOnError(error: unknown): Held | undefined
}

/** For the repository that makes claims: the opaque claim the services pass on. */
export const sealPostgresClaim = <Result, Held>(claim: PostgresClaim<Result, Held>): Claim<Result, Held> => claim as unknown as Claim<Result, Held>

/** For the repository that writes under a claim of the same engine (src/repositories.ts pairs them). */
export const openPostgresClaim = <Result, Held>(claim: Claim<Result, Held>): PostgresClaim<Result, Held> =>
  claim as unknown as PostgresClaim<Result, Held>
