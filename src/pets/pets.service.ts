import { createHash } from 'node:crypto'
import type { Clock } from '../shared/clock.js'
import { ApiError } from '../errors.js'
import type { Claim, Claimed } from '../storage/claim.js'
import { decodeCursor, encodeCursor } from './pets.cursor.js'
import type { NewPet, Pet, PetStatus, PetsRepository } from './pets.repository.js'

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

interface PetsPage {
  pets: Pet[]
  /** The cursor of the next page; absent on the last one. */
  next?: string
}

export interface PetsService {
  create(pet: NewPet): Promise<Pet>
  /** The create of a request answered once only: see PetsRepository.createOnce. */
  createOnce<Result, Held>(pet: NewPet, claim: Claim<Result, Held>, respond: (pet: Pet) => Result): Promise<Claimed<Result, Held>>
  /** One page; `cursor` is the `next` of the previous page with the same `status`. */
  list(query: { limit: number; status?: PetStatus; cursor?: string }): Promise<PetsPage>
  /** The pet with this id, and the count of rewrites its read saw (see `rewrites`); throws `not_found` when there is none. */
  get(id: bigint): Promise<{ pet: Pet; rewrites?: number }>
  /**
   * Changes whenever any pet may have: answers read through this service may be cached until it
   * does. Absent where the engine cannot tell exactly and cheaply (see PetsRepository.version).
   */
  readonly version?: () => number
  /**
   * The count of rewrites now, where the engine keeps one (PetsRepository.rewrites): an answer read with
   * count n may be cached while the count is n.
   */
  readonly rewrites?: () => Promise<number | undefined>
}

export function createPetsService(deps: { pets: PetsRepository; clock: Clock }): PetsService {
  const { pets, clock } = deps
  return {
    create: (pet) => pets.create(pet, clock.now()),
    createOnce: (pet, claim, respond) => pets.createOnce(pet, clock.now(), claim, respond),
    async list({ limit, status, cursor }) {
      const { afterId, atLeast } = cursor === undefined ? { afterId: 0n, atLeast: undefined } : decodeCursor(cursor, status)
      // One more than asked: whether it exists decides if there is a next page, without a count.
      const { pets: found, readAt } = await pets.list({ limit: limit + 1, status, afterId, atLeast })
      if (found.length <= limit) return { pets: found }
      const page = found.slice(0, limit)
      return { pets: page, next: encodeCursor(page[limit - 1]?.id ?? afterId, status, readAt) }
    },
    async get(id) {
      const { pet, rewrites } = await pets.findById(id)
      if (pet === undefined) throw new ApiError('not_found', `No pet has id ${id}.`)
      return { pet, rewrites }
    },
    version: pets.version?.bind(pets),
    rewrites: pets.rewrites?.bind(pets),
  }
}
