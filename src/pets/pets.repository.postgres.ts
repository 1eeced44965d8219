import type pg from 'pg'
import type { ListPetsQuery, NewPet, Pet, PetStatus, PetsRepository } from './pets.repository.js'

// pg returns int8 as text: it is turned into a BigInt here, never into a lossy number.
interface PetRow {
  id: string
  name: string
  category_id: string
  status: PetStatus | null
}

function toPet(row: PetRow): Pet {
  const pet: Pet = { id: BigInt(row.id), name: row.name, categoryId: BigInt(row.category_id) }
  if (row.status !== null) pet.status = row.status
  return pet
}

const COLUMNS = 'id, name, category_id, status'

/** Inserts a pet through `db` (the pool, or a client inside a transaction). */
export async function insertPostgresPet(db: pg.Pool | pg.PoolClient, pet: NewPet, createdAt: number): Promise<Pet> {
  const { rows } = await db.query<{ id: string }>({
    name: 'pets-insert',
    text: 'INSERT INTO pets (name, category_id, status, created_at) VALUES ($1, $2, $3, $4) RETURNING id',
    values: [pet.name, pet.categoryId.toString(), pet.status ?? null, createdAt],
  })
  const id = rows[0]?.id
  if (id === undefined) throw new Error('INSERT … RETURNING id returned no row')
  return { ...pet, id: BigInt(id) }
}

export function createPostgresPetsRepository(pool: pg.Pool): PetsRepository {
  // Named queries are prepared once per connection.
  return {
    create: (pet: NewPet, createdAt: number): Promise<Pet> => insertPostgresPet(pool, pet, createdAt),
    async list({ limit, status }: ListPetsQuery): Promise<Pet[]> {
      const { rows } =
        status === undefined
          ? await pool.query<PetRow>({
              name: 'pets-list',
              text: `SELECT ${COLUMNS} FROM pets ORDER BY id LIMIT $1`,
              values: [limit],
            })
          : await pool.query<PetRow>({
              name: 'pets-list-by-status',
              text: `SELECT ${COLUMNS} FROM pets WHERE status = $1 ORDER BY id LIMIT $2`,
              values: [status, limit],
            })
      return rows.map(toPet)
    },
    async findById(id: bigint): Promise<Pet | undefined> {
      const { rows } = await pool.query<PetRow>({
        name: 'pets-by-id',
        text: `SELECT ${COLUMNS} FROM pets WHERE id = $1`,
        values: [id.toString()],
      })
      return rows[0] === undefined ? undefined : toPet(rows[0])
    },
  }
}
