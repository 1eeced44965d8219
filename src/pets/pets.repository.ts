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
}

/** Where pets are kept. One implementation per storage engine; rows never leave it. */
export interface PetsRepository {
  create(pet: NewPet, createdAt: number): Promise<Pet>
  /** Up to `limit` pets in ascending id order, with no gap: a pet still being created with a lower id is waited for. */
  list(query: ListPetsQuery): Promise<Pet[]>
  findById(id: bigint): Promise<Pet | undefined>
  /**
   * A number that changes whenever any pet may have changed, through this process or any other.
   * Only engines that can tell exactly and cheaply have it: answers are cached until it changes.
   */
  version?(): number
}
