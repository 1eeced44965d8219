import type { Database } from 'better-sqlite3'
import type { ListPetsQuery, NewPet, Pet, PetStatus, PetsRepository } from './pets.repository.js'

interface PetRow {
  id: bigint
  name: string
  category_id: bigint
  status: PetStatus | null
}

function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row.id, name: row.name, categoryId: row.category_id }
  if (row.status !== null) pet.status = row.status
  return pet
}

/** Prepares the pet insert, for this repository and for writes that join it in a transaction. */
export function prepareSqlitePetInsert(db: Database): (pet: NewPet, createdAt: number) => Pet {
  // safeIntegers: ids and category ids are int64 and must not pass through a double.
  const insert = db
    .prepare<[string, bigint, PetStatus | null, number]>(
      'INSERT INTO pets (name, category_id, status, created_at) VALUES (?, ?, ?, ?)',
    )
    .safeIntegers(true)
  return (pet, createdAt) => {
    const { lastInsertRowid } = insert.run(pet.name, pet.categoryId, pet.status ?? null, createdAt)
    return { ...pet, id: BigInt(lastInsertRowid) }
  }
}

export function createSqlitePetsRepository(db: Database): PetsRepository {
  const insert = prepareSqlitePetInsert(db)
  // SQLite has one writer at a time and ids grow with each commit, so keyset pages never miss a pet.
  const listAll = db
    .prepare<[bigint, number], PetRow>('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?')
    .safeIntegers(true)
  const listByStatus = db
    .prepare<[PetStatus, bigint, number], PetRow>(
      'SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?',
    )
    .safeIntegers(true)
  const byId = db
    .prepare<[bigint], PetRow>('SELECT id, name, category_id, status FROM pets WHERE id = ?')
    .safeIntegers(true)

  return {
    create: (pet: NewPet, createdAt: number): Promise<Pet> => Promise.resolve(insert(pet, createdAt)),
    list({ limit, status, afterId }: ListPetsQuery): Promise<Pet[]> {
      const rows = status === undefined ? listAll.all(afterId, limit) : listByStatus.all(status, afterId, limit)
      return Promise.resolve(rows.map(toPet))
    },
    findById(id: bigint): Promise<Pet | undefined> {
      const row = byId.get(id)
      return Promise.resolve(row === undefined ? undefined : toPet(row))
    },
  }
}
