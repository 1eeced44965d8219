import type pg from 'pg'
import type { Claim, Claimed } from '../storage/claim.js'
import { openPostgresClaim } from '../storage/postgres/claim.js'
import { inTransaction } from '../storage/postgres/transaction.js'
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

/** The pet `insert` made, from its RETURNING row. */
function inserted(pet: NewPet, { rows }: pg.QueryResult<{ id: string }>): Pet {
  const id = rows[0]?.id
  if (id === undefined) throw new Error('INSERT … RETURNING id returned no row')
  return { ...pet, id: BigInt(id) }
}

/** Inserts a pet through `db` (the pool, or a client inside a transaction). Not async: one promise, the driver's. */
export function insertPostgresPet(db: pg.Pool | pg.PoolClient, pet: NewPet, createdAt: number): Promise<Pet> {
  return db
    .query<{ id: string }>({
      name: 'pets-insert',
      text: INSERT_PET,
      values: [pet.name, pet.categoryId.toString(), pet.status ?? null, createdAt],
    })
    .then((result) => inserted(pet, result))
}

export function createPostgresPetsRepository(pool: pg.Pool): PetsRepository {
  // Named queries are prepared once per connection.
  return {
    create: (pet: NewPet, createdAt: number): Promise<Pet> => insertPostgresPet(pool, pet, createdAt),
    async createOnce<Result, Held>(
      pet: NewPet,
      createdAt: number,
      sealed: Claim<Result, Held>,
      respond: (pet: Pet) => Result,
    ): Promise<Claimed<Result, Held>> {
      const claim = openPostgresClaim(sealed)
      try {
        return await inTransaction(pool, claim.begin, async (client): Promise<Claimed<Result, Held>> => {
          // The claim is taken before the insert takes the lock of pet_ids_settled: a request that
          // waits for another one's claim holds nothing that pages wait for.
          const held = await claim.take(client)
          if (held !== undefined) return { held }
          const result = respond(await insertPostgresPet(client, pet, createdAt))
          await claim.complete(client, result)
          return { created: result }
        })
      } catch (error) {
        const held = claim.heldOnError(error)
        if (held === undefined) throw error
        return { held }
      }
    },
    async list({ limit, status, afterId }: ListPetsQuery): Promise<Pet[]> {
      if (status === undefined) {
        // An unfiltered page is every pet of its id range, so it shows whether that range has a
        // hole: without one it is settled, as `pets_page` would find, and one plain statement (the
        // common case, and cheaper at the database than the function: docs/decisions/0015-postgres-read-path.md)
        // is the whole read. With one, `pets_page` reads it again and waits if it must.
        const { rows } = await pool.query<PetRow>({
          name: 'pets-page-unfiltered',
          text: `SELECT ${COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
          values: [afterId.toString(), limit],
        })
        const last = rows.at(-1)
        if (last === undefined || BigInt(last.id) - afterId === BigInt(rows.length)) return rows.map(toPet)
      }
      const { rows } = await pool.query<PetRow>({
        name: 'pets-page',
        text: `SELECT ${COLUMNS} FROM pets_page($1, $2, $3)`,
        values: [afterId.toString(), limit, status ?? null],
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
