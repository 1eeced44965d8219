// The SQLite run's pets in memory, as the bare baseline (baseline.ts) and the floor (floor.ts) both keep
// them: an array in id order (and a Map by id), `JSON.stringify` per request. One store for both, so the
// two differ in what stands between the socket and the store only.
import fs from 'node:fs'
import type { BaselineStore, NewPet, PetStatus } from './baseline-http.js'

interface Pet extends NewPet {
  id: number
}

/** A BaselineStore whose answers are never promises: memory has nothing to wait for. */
export interface MemoryStore extends BaselineStore {
  list(limit: number, status: PetStatus | undefined): string
  get(id: string): string | undefined
  create(pet: NewPet): { id: string; body: string }
  /** Pets held now. */
  readonly size: number
}

/** The seeded pets of `petsFile` (a JSON array in id order, as bench/setup.ts writes it). */
export function loadMemoryStore(petsFile: string): MemoryStore {
  const pets = JSON.parse(fs.readFileSync(petsFile, 'utf8')) as Pet[]
  const byId = new Map(pets.map((pet) => [pet.id, pet]))
  let nextId = pets.reduce((max, pet) => Math.max(max, pet.id), 0) + 1
  return {
    list(limit, status) {
      const page: Pet[] = []
      for (const pet of pets) {
        if (page.length === limit) break
        if (status === undefined || pet.status === status) page.push(pet)
      }
      return JSON.stringify(page)
    },
    get(id) {
      const pet = byId.get(Number(id))
      // Above 2^53 Number(id) could name another pet; no seeded id is that large.
      return pet === undefined ? undefined : JSON.stringify(pet)
    },
    create(fields) {
      // Key order as the service writes it: id, name, categoryId, status.
      const pet: Pet = { id: nextId++, ...fields }
      pets.push(pet)
      byId.set(pet.id, pet)
      return { id: String(pet.id), body: JSON.stringify(pet) }
    },
    get size() {
      return pets.length
    },
  }
}
