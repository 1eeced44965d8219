import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { ListPetsQuery, NewPet, Pet, PetsRepository } from './pets.repository.js'

export interface PetsService {
  create(pet: NewPet): Promise<Pet>
  list(query: ListPetsQuery): Promise<Pet[]>
  /** The pet with this id; throws `not_found` when there is none. */
  get(id: bigint): Promise<Pet>
}

export function createPetsService(deps: { pets: PetsRepository; clock: Clock }): PetsService {
  const { pets, clock } = deps
  return {
    create: (pet) => pets.create(pet, clock.now()),
    list: (query) => pets.list(query),
    async get(id) {
      const pet = await pets.findById(id)
      if (pet === undefined) throw new ApiError('not_found', `No pet has id ${id}.`)
      return pet
    },
  }
}
