import type { Claim } from '../claim.js'

/** A claim on SQLite, whose transactions are synchronous calls: taken and completed inside the writer's. */
export interface SqliteClaim<Result, Held> {
  /** Inside the writer's transaction: undefined once taken, or who holds it. */
  take(): Held | undefined
  complete(result: Result): void
}

/** For the repository that makes claims: the opaque claim the services pass on. */
export const sealSqliteClaim = <Result, Held>(claim: SqliteClaim<Result, Held>): Claim<Result, Held> => claim as unknown as Claim<Result, Held>

/** For the repository that writes under a claim of the same engine (src/repositories.ts pairs them). */
export const openSqliteClaim = <Result, Held>(claim: Claim<Result, Held>): SqliteClaim<Result, Held> => claim as unknown as SqliteClaim<Result, Held>
