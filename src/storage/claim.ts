/*
 * A claim: one feature's writes that must commit or roll back with another feature's write, in
 * the transaction of the feature that writes (the record of an Idempotency-Key, with the pet it
 * answers for: docs/decisions/0005-idempotency.md). The writer runs the transaction: it takes the
 * claim first and writes nothing when someone else holds it; otherwise it writes and completes the
 * claim with its result. Each side keeps its own SQL; this is all the two share.
 *
 * Between them, through the services, a claim is opaque: only a repository of the engine that made
 * it opens it, with that engine's shape (sqlite/claim.ts, postgres/claim.ts). The repositories of
 * one engine are put together in one place (src/repositories.ts), so a claim never meets another's.
 */

declare const opaque: unique symbol

/** A claim in transit: what it completes with (`Result`) and who may hold it (`Held`) are all it tells. */
export interface Claim<Result, Held> {
  readonly [opaque]: { result: Result; held: Held }
}

/** What a claimed write did: wrote and completed the claim with its result, or found it held and wrote nothing. */
export type Claimed<Result, Held> = { created: Result } | { held: Held }
