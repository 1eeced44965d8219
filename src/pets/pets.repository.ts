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
}

/** Where pets are kept. One implementation per storage engine; rows never leave it. */
export interface PetsRepository {
  create(pet: NewPet, createdAt: number): Promise<Pet>
  list(query: ListPetsQuery): Promise<Pet[]>
  findById(id: bigint): Promise<Pet | undefined>
}
