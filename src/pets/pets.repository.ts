import type { Claim, Claimed } from '../storage/claim.js'

export const PET_STATUSES = ['available', 'pending', 'sold'] as const
export type PetStatus = (typeof PET_STATUSES)[number]

export interface NewPet {
  name: string
  categoryId: bigint
  status?: PetStatus
}

export interface Pet extends NewPet {
  id: bigint
}

export interface ListPetsQuery {
  limit: number
  status?: PetStatus
  /** Only pets with a greater id: the keyset of the previous page. */
  afterId: bigint
  /** Read on a server that has replayed at least this far (a standby), or on the primary: where the previous page was read. */
  atLeast?: bigint
}

/** A pet read by its id, and the count of rewrites the read saw, on an engine that keeps one (PetsRepository.rewrites). */
export interface PetRead {
  pet: Pet | undefined
  rewrites?: number
}

export interface PetsRead {
  /** In ascending id order. */
  pets: Pet[]
  /** With standbys: where the server that answered was (replica-set.ts POSITION_SQL), for the next page's cursor. */
  readAt?: bigint
}

/** Where pets are kept. One implementation per storage engine; rows never leave it. */
export interface PetsRepository {
  create(pet: NewPet, createdAt: number): Promise<Pet>
  /**
   * The create of a request that may be answered once only (an `Idempotency-Key`): in one
   * transaction, takes `claim`, inserts the pet and completes the claim with `respond(pet)`; or,
   * when another request holds the claim, writes nothing and resolves to it. The claim lives and
   * dies with the pet. Not batched with other creates.
   */
  createOnce<Result, Held>(
    pet: NewPet,
    createdAt: number,
    claim: Claim<Result, Held>,
    respond: (pet: Pet) => Result,
  ): Promise<Claimed<Result, Held>>
  /** Up to `limit` pets in ascending id order, with no gap: a pet still being created with a lower id is waited for. */
  list(query: ListPetsQuery): Promise<PetsRead>
  findById(id: bigint): Promise<PetRead>
  /**
   * A number that changes whenever any pet may have changed, through this process or any other.
   * Only engines that can tell exactly and cheaply have it: answers are cached until it changes.
   */
  version?(): number
  /**
   * On an engine that counts, in the database, the statements that changed or removed pets, by anyone
   * (PostgreSQL, migration 0008): the count now, on the primary; undefined when it cannot be read there.
   * findById then gives the count its read saw. No create moves it: a pet read with count n is current
   * while the count is n.
   */
  rewrites?(): Promise<number | undefined>
}
