import { createHash, randomUUID } from 'node:crypto'
import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { NewPet, Pet } from '../pets/pets.repository.js'
import { IDEMPOTENCY_ABANDONED_AFTER_MS, IDEMPOTENCY_PRUNE_INTERVAL_MS, IDEMPOTENCY_RETENTION_MS } from './idempotency.policy.js'
import type { IdempotencyRepository, StoredResponse } from './idempotency.repository.js'

/**
 * What makes two createPet requests "the same": their validated content, not their bytes, so
 * that key order, white space and escapes do not matter. The operation is part of it so that a
 * key can never be replayed across operations.
 */
export function createPetFingerprint(pet: NewPet): string {
  const canonical = JSON.stringify({
    operation: 'createPet',
    name: pet.name,
    categoryId: pet.categoryId.toString(),
    status: pet.status ?? null,
  })
  return createHash('sha256').update(canonical).digest('hex')
}

interface IdempotentResponse {
  response: StoredResponse
  /** True when the response is that of an earlier request with the same key. */
  replayed: boolean
}

export interface IdempotencyService {
  /**
   * Creates the pet once per `key` within `scope` (the API key's id) and answers every request
   * with the same key and content with the same response, `respond(pet)`. Throws
   * `idempotency_key_reused` for other content and `idempotency_key_in_use` while a request with
   * the key is still being processed.
   */
  createPet(request: {
    scope: string
    key: string
    pet: NewPet
    respond: (pet: Pet) => StoredResponse
  }): Promise<IdempotentResponse>
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
    async createPet({ scope, key, pet, respond }) {
      const now = clock.now()
      await pruneWhenDue(now)
      const fingerprint = createPetFingerprint(pet)
      // A failure rolls back the whole transaction, record included: a retry with the key is processed afresh.
      const outcome = await idempotency.createPet(
        {
          scope,
          key,
          attemptId: randomUUID(),
          fingerprint,
          now,
          abandonedBefore: now - IDEMPOTENCY_ABANDONED_AFTER_MS,
          expiredBefore: now - IDEMPOTENCY_RETENTION_MS,
        },
        pet,
        respond,
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
