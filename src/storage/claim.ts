import type pg from 'pg'

/*
 * A claim: one feature's writes that must commit or roll back with another feature's write, in
 * the transaction of the feature that writes (the record of an Idempotency-Key, with the pet it
 * answers for: docs/decisions/0005-idempotency.md). The writer runs the transaction: it takes the
 * claim first and writes nothing when someone else holds it; otherwise it writes and completes the
 * claim with its result. Each side keeps its own SQL; this is all the two share. One shape per
 * engine: SQLite's transactions are synchronous calls, PostgreSQL's live on one connection.
 */

export interface SqliteClaim<Result, Held> {
  readonly engine: 'sqlite'
  /** Inside the writer's transaction: undefined once taken, or who holds it. */
  take(): Held | undefined
  complete(result: Result): void
}

export interface PostgresClaim<Result, Held> {
  readonly engine: 'postgres'
  /** `BEGIN` with any `SET LOCAL` the claim's waits need: one round trip. */
  readonly begin: string
  take(client: pg.PoolClient): Promise<Held | undefined>
  complete(client: pg.PoolClient, result: Result): Promise<void>
  /** After the rollback: who holds the claim when `error` means so (a wait for the holder ran out), else undefined. */
  heldOnError(error: unknown): Held | undefined
}

export type Claim<Result, Held> = SqliteClaim<Result, Held> | PostgresClaim<Result, Held>

/** What a claimed write did: wrote and completed the claim with its result, or found it held and wrote nothing. */
export type Claimed<Result, Held> = { created: Result } | { held: Held }
