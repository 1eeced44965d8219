import { createHash, randomUUID } from 'node:crypto'
import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { NewPet, Pet } from '../pets/pets.repository.js'
import { IDEMPOTENCY_ABANDONED_AFTER_MS, IDEMPOTENCY_PRUNE_INTERVAL_MS, IDEMPOTENCY_RETENTION_MS } from './idempotency.policy.js'
import type { IdempotencyAttempt, IdempotencyRepository, StoredResponse } from './idempotency.repository.js'

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

const inUse = () =>
  new ApiError(
    'idempotency_key_in_use',
    'A request with this Idempotency-Key is still being processed; retry once it has finished.',
  )

export function createIdempotencyService(deps: { idempotency: IdempotencyRepository; clock: Clock }): IdempotencyService {
  const { idempotency, clock } = deps
  let lastPrunedAt = Number.NEGATIVE_INFINITY

  async function pruneWhenDue(now: number): Promise<void> {
    if (now - lastPrunedAt < IDEMPOTENCY_PRUNE_INTERVAL_MS) return
    lastPrunedAt = now
    await idempotency.prune(now - IDEMPOTENCY_RETENTION_MS)
  }

  /** Frees the key after a failed attempt; if that fails too, the record is abandoned and expires. */
  async function release(attempt: IdempotencyAttempt): Promise<void> {
    try {
      await idempotency.release(attempt)
    } catch {
      // The attempt's own failure is what the client needs to hear about.
    }
  }

  return {
    async createPet({ scope, key, pet, respond }) {
      const now = clock.now()
      await pruneWhenDue(now)
      const fingerprint = createPetFingerprint(pet)
      const attempt: IdempotencyAttempt = { scope, key, attemptId: randomUUID() }
      const held = await idempotency.claim(attempt, {
        fingerprint,
        now,
        abandonedBefore: now - IDEMPOTENCY_ABANDONED_AFTER_MS,
        expiredBefore: now - IDEMPOTENCY_RETENTION_MS,
      })
      if (held !== undefined) {
        // A different body is refused whatever the state of the first request: the answer must
        // not depend on timing.
        if (held.fingerprint !== fingerprint) {
          throw new ApiError(
            'idempotency_key_reused',
            'This Idempotency-Key was already used with a different request body; use a new key for a new request.',
          )
        }
        if (held.state === 'in_progress') throw inUse()
        return { response: held.response, replayed: true }
      }

      let response: StoredResponse | undefined
      try {
        response = await idempotency.createPet(attempt, pet, now, respond)
      } catch (error) {
        // Nothing was created: the client may retry with the same key.
        await release(attempt)
        throw error
      }
      // Another attempt took the key over as abandoned while this one ran; it answers for the key.
      if (response === undefined) throw inUse()
      return { response, replayed: false }
    },
  }
}
