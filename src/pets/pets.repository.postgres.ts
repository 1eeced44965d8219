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

/** The filtered page query; its plan must walk the (status, id) index in order (test/read-cache.test.ts). */
export const POSTGRES_LIST_BY_STATUS = `SELECT ${COLUMNS} FROM pets WHERE status = $1 AND id > $2 AND id <= $3 ORDER BY id LIMIT $4`

/*
 * PostgreSQL draws identity values before commit, so concurrent creates can commit out of id
 * order: a page read in between would show id 11 while id 10 is still invisible, and the next
 * page (after 11) would skip 10 for good. Every create therefore holds this advisory lock shared
 * from before it draws its id until it commits, and a page read first waits for the lock
 * exclusively: then every id up to the sequence's value read in the same statement is settled,
 * and the page stops there. Readers hold the lock only for that one statement.
 */
const PET_IDS_LOCK = 0x7065_7473 // "pets"

/** Inserts a pet through `db` (the pool, or a client inside a transaction). */
export async function insertPostgresPet(db: pg.Pool | pg.PoolClient, pet: NewPet, createdAt: number): Promise<Pet> {
  const { rows } = await db.query<{ id: string }>({
    name: 'pets-insert',
    text:
      `WITH settle AS (SELECT pg_advisory_xact_lock_shared(${PET_IDS_LOCK})) ` +
      'INSERT INTO pets (name, category_id, status, created_at) SELECT $1, $2, $3, $4 FROM settle RETURNING id',
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
    async list({ limit, status, afterId }: ListPetsQuery): Promise<Pet[]> {
      const { rows: settled } = await pool.query<{ id: string | null }>({
        name: 'pets-settled',
        text:
          `SELECT pg_advisory_xact_lock(${PET_IDS_LOCK}), ` +
          "pg_sequence_last_value(pg_get_serial_sequence('pets', 'id')::regclass)::text AS id",
      })
      const upTo = settled[0]?.id ?? '0'
      const { rows } =
        status === undefined
          ? await pool.query<PetRow>({
              name: 'pets-list',
              text: `SELECT ${COLUMNS} FROM pets WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3`,
              values: [afterId.toString(), upTo, limit],
            })
          : await pool.query<PetRow>({
              name: 'pets-list-by-status',
              text: POSTGRES_LIST_BY_STATUS,
              values: [status, afterId.toString(), upTo, limit],
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
