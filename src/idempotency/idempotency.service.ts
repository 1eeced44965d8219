import { randomUUID } from 'node:crypto'
import type { Clock } from '../shared/clock.js'
import { ApiError } from '../errors.js'
import type { Claim, Claimed } from '../storage/claim.js'
import { IDEMPOTENCY_ABANDONED_AFTER_MS, IDEMPOTENCY_PRUNE_INTERVAL_MS, IDEMPOTENCY_RETENTION_MS } from './idempotency.policy.js'
import type { HeldRecord, IdempotencyRepository, StoredResponse } from './idempotency.repository.js'

interface IdempotentResponse {
  response: StoredResponse
  /** True when the response is that of an earlier request with the same key. */
  replayed: boolean
}

export interface IdempotencyService {
  /**
   * Runs `write` once per `key` within `scope` (the API key's lineage), with the key's claim to take in
   * its transaction, and answers every request with the same key and `fingerprint` with the
   * response `write` recorded. Throws `idempotency_key_reused` for another fingerprint and
   * `idempotency_key_in_use` while a request with the key is still being processed.
   */
  once(
    request: { scope: string; key: string; fingerprint: string },
    write: (claim: Claim<StoredResponse, HeldRecord>) => Promise<Claimed<StoredResponse, HeldRecord>>,
  ): Promise<IdempotentResponse>
}

export function createIdempotencyService(deps: { idempotency: IdempotencyRepository; clock: Clock }): IdempotencyService {
  const { idempotency, clock } = deps
  let lastPrunedAt = Number.NEGATIVE_INFINITY

  async function pruneWhenDue(now: number): Promise<void> {
    if (now - lastPrunedAt < IDEMPOTENCY_PRUNE_INTERVAL_MS) return
    lastPrunedAt = now
    await idempotency.prune(now - IDEMPOTENCY_RETENTION_MS)
  }

  return {
    async once({ scope, key, fingerprint }, write) {
      const now = clock.now()
      await pruneWhenDue(now)
      // A failure rolls back the whole transaction, record included: a retry with the key is processed afresh.
      const outcome = await write(
        idempotency.claim({
          scope,
          key,
          attemptId: randomUUID(),
          fingerprint,
          now,
          abandonedBefore: now - IDEMPOTENCY_ABANDONED_AFTER_MS,
          expiredBefore: now - IDEMPOTENCY_RETENTION_MS,
        }),
      )
      if ('created' in outcome) return { response: outcome.created, replayed: false }
      const { held } = outcome
      // A different body is refused whatever the state of the first request, once its record is visible.
      if (held.fingerprint !== undefined && held.fingerprint !== fingerprint) {
        throw new ApiError(
          'idempotency_key_reused',
          'This Idempotency-Key was already used with a different request body; use a new key for a new request.',
        )
      }
      if (held.state === 'in_progress') {
        throw new ApiError(
          'idempotency_key_in_use',
          'A request with this Idempotency-Key is still being processed; retry once it has finished.',
        )
      }
      return { response: held.response, replayed: true }
    },
  }
}
