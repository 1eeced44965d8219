import type pg from 'pg'
import type { Sql } from 'postgres'
import type { ListPetsQuery, NewPet, Pet, PetStatus, PetsRepository } from './pets.repository.js'

// The driver returns int8 as text (no bigint type is configured): it is turned into a BigInt here,
// never into a lossy number.
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

/*
 * PostgreSQL draws identity values before commit, so concurrent creates can commit out of id
 * order: a page read in between would show id 11 while id 10 is still invisible, and the next
 * page (after 11) would skip 10 for good. The function `pets_page` (migration 0004) answers a page
 * at once when every id from the cursor to its last pet is there, since no create in flight can
 * fill a hole below it; otherwise it waits until no create is in flight, through the table lock of
 * `pet_ids_settled`, which every create holds in ROW EXCLUSIVE mode from before it draws its id
 * until it commits, and which the function takes in SHARE mode. Creates never wait for each other,
 * nor reads for each other, on any instance (docs/decisions/0015-postgres-read-path.md).
 *
 * The empty INSERT takes that lock: a statement locks every table it names before it runs, so
 * before the pets row draws its id.
 */
const INSERT_PET =
  'WITH settle AS (INSERT INTO pet_ids_settled SELECT WHERE false) ' +
  'INSERT INTO pets (name, category_id, status, created_at) VALUES ($1, $2, $3, $4) RETURNING id'

/** The values of INSERT_PET, int8 as exact text. */
const insertPetValues = (pet: NewPet, createdAt: number) => [pet.name, pet.categoryId.toString(), pet.status ?? null, createdAt]

/** The pet INSERT_PET made, from the id it returned. */
function insertedPet(pet: NewPet, rows: readonly { id: string }[]): Pet {
  const id = rows[0]?.id
  if (id === undefined) throw new Error('INSERT … RETURNING id returned no row')
  return { ...pet, id: BigInt(id) }
}

/** Inserts a pet through a node-postgres client inside a transaction (idempotent creates). */
export async function insertPostgresPet(db: pg.Pool | pg.PoolClient, pet: NewPet, createdAt: number): Promise<Pet> {
  const { rows } = await db.query<{ id: string }>({ name: 'pets-insert', text: INSERT_PET, values: insertPetValues(pet, createdAt) })
  return insertedPet(pet, rows)
}

const COLUMNS = 'id, name, category_id, status'
const PAGE = `SELECT ${COLUMNS} FROM pets_page($1, $2, $3)`
const BY_ID = `SELECT ${COLUMNS} FROM pets WHERE id = $1`

export function createPostgresPetsRepository(sql: Sql): PetsRepository {
  // Every statement is prepared once per connection (the driver's default) and pipelined.
  return {
    async create(pet: NewPet, createdAt: number): Promise<Pet> {
      return insertedPet(pet, await sql.unsafe<{ id: string }[]>(INSERT_PET, insertPetValues(pet, createdAt), { prepare: true }))
    },
    async list({ limit, status, afterId }: ListPetsQuery): Promise<Pet[]> {
      const rows = await sql.unsafe<PetRow[]>(PAGE, [afterId.toString(), limit, status ?? null], { prepare: true })
      return rows.map(toPet)
    },
    async findById(id: bigint): Promise<Pet | undefined> {
      const rows = await sql.unsafe<PetRow[]>(BY_ID, [id.toString()], { prepare: true })
      return rows[0] === undefined ? undefined : toPet(rows[0])
    },
  }
}
