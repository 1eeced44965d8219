import type pg from 'pg'
import type { Claim, Claimed } from '../storage/claim.js'
import { openPostgresClaim } from '../storage/postgres/claim.js'
import { PrimaryUnavailable } from '../storage/postgres/errors.js'
import { POSITION_SQL, type ReplicaSet } from '../storage/postgres/replica-set.js'
import { inTransaction } from '../storage/postgres/transaction.js'
import type { ListPetsQuery, NewPet, Pet, PetRead, PetStatus, PetsRead, PetsRepository } from './pets.repository.js'

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

/** pet_rewrites' count (migration 0008), as int8 text; from the same snapshot when read in the same statement. */
const REWRITES_SQL = '(SELECT count::text FROM pet_rewrites)'

/** The pet with `id`, and the count of rewrites that its read saw (PetsRepository.rewrites). */
async function petById(on: pg.Pool, id: bigint): Promise<PetRead> {
  const { rows } = await on.query<PetRow & { rewrites: string | null }>({
    name: 'pets-by-id-counted',
    text: `SELECT ${COLUMNS}, ${REWRITES_SQL} AS rewrites FROM pets WHERE id = $1`,
    values: [id.toString()],
  })
  const row = rows[0]
  if (row === undefined) return { pet: undefined }
  return row.rewrites === null ? { pet: toPet(row) } : { pet: toPet(row), rewrites: Number(row.rewrites) }
}

/** Where the server was when it read the page: with standbys, a page's rows carry it (POSITION_SQL). */
interface PageRow extends PetRow {
  read_at?: string
}

function pageRead(rows: PageRow[]): PetsRead {
  const at = rows[0]?.read_at
  return at === undefined ? { pets: rows.map(toPet) } : { pets: rows.map(toPet), readAt: BigInt(at) }
}

const AT = `, ${POSITION_SQL} AS read_at`

/**
 * A page as the primary reads it, with where it was read (`at`) when standbys serve the next ones.
 *
 * An unfiltered page is every pet of its id range, so it shows whether that range has a hole: without
 * one it is settled, as `pets_page` would find, and one plain statement (the common case, and cheaper at
 * the database than the function: docs/decisions/0015-postgres-read-path.md) is the whole read. With one,
 * `pets_page` reads it again and waits if it must.
 */
async function primaryPage(pool: pg.Pool, { limit, status, afterId }: ListPetsQuery, at: boolean): Promise<PetsRead> {
  if (status === undefined) {
    const { rows } = await pool.query<PageRow>({
      name: at ? 'pets-page-unfiltered-at' : 'pets-page-unfiltered',
      text: `SELECT ${COLUMNS}${at ? AT : ''} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
      values: [afterId.toString(), limit],
    })
    const last = rows.at(-1)
    if (last === undefined || BigInt(last.id) - afterId === BigInt(rows.length)) return pageRead(rows)
  }
  const { rows } = await pool.query<PageRow>({
    name: at ? 'pets-page-at' : 'pets-page',
    text: `SELECT ${COLUMNS}${at ? AT : ''} FROM pets_page($1, $2, $3)`,
    values: [afterId.toString(), limit, status ?? null],
  })
  return pageRead(rows)
}

interface StandbyPage extends PetsRead {
  /** Every id from the cursor to the page's last pet is there (ADR 15's rule): no pet can be missing below it. */
  settled: boolean
}

/**
 * A page as a standby reads it, and whether it is settled. A standby cannot wait for a create in
 * flight (there is none there), so a page with a hole is the primary's to answer. A filtered page counts
 * the pets of its range, as `pets_page` does, only over a range of at most ten pages.
 */
async function standbyPage(pool: pg.Pool, { limit, status, afterId }: ListPetsQuery): Promise<StandbyPage> {
  if (status === undefined) {
    const { rows } = await pool.query<PageRow>({
      name: 'pets-standby-page-unfiltered',
      text: `SELECT ${COLUMNS}${AT} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
      values: [afterId.toString(), limit],
    })
    const last = rows.at(-1)
    return { ...pageRead(rows), settled: last === undefined || BigInt(last.id) - afterId === BigInt(rows.length) }
  }
  const { rows } = await pool.query<PageRow & { present: string }>({
    name: 'pets-standby-page',
    text:
      `WITH page AS (SELECT ${COLUMNS} FROM pets WHERE status = $3 AND id > $1 ORDER BY id LIMIT $2), ` +
      'bound AS (SELECT max(id) AS last_id FROM page) ' +
      `SELECT page.*${AT}, (SELECT count(*) FROM pets q, bound WHERE q.id > $1 AND q.id <= bound.last_id AND bound.last_id - $1 <= 10 * $2::bigint) AS present ` +
      'FROM page ORDER BY id',
    values: [afterId.toString(), limit, status],
  })
  const last = rows.at(-1)
  return { ...pageRead(rows), settled: last === undefined || BigInt(last.id) - afterId === BigInt(last.present) }
}

/** The pets of `pool`; with `replicas`, reads go to standbys where that keeps their promises (docs/api.md). */
export function createPostgresPetsRepository(pool: pg.Pool, replicas?: ReplicaSet): PetsRepository {
  const findById = (id: bigint): Promise<PetRead> => {
    if (replicas === undefined) return petById(pool, id)
    // A standby that misses the pet may not have it yet: the primary is asked before it is a 404, and
    // with the primary down, the miss is a 503 rather than a 404 for a pet that may have been acknowledged.
    return replicas.read<PetRead>(
      {
        kind: 'pet',
        first: 'replica',
        stands: (read) => read.pet !== undefined,
        primaryDown: (read) => {
          if (read.pet === undefined) throw new PrimaryUnavailable()
          return read
        },
      },
      (on) => petById(on, id),
    )
  }
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
    list: (query: ListPetsQuery): Promise<PetsRead> => {
      if (replicas === undefined) return primaryPage(pool, query, false)
      // A standby's page stands when it is settled and has a next page: every id of its range is there, so
      // no pet acknowledged is missing from it. A last page is read on the primary, since a standby may not
      // yet have the pets acknowledged after it; so is a page with a hole, where the primary waits if it must.
      // With the primary down, a standby's page is the answer: no create can be acknowledged meanwhile.
      return replicas.read<StandbyPage>(
        { kind: 'page', first: 'replica', atLeast: query.atLeast, stands: (read) => read.settled && read.pets.length === query.limit },
        (on, from) => (from === 'primary' ? primaryPage(on, query, true).then((read) => ({ ...read, settled: true })) : standbyPage(on, query)),
      ).then(({ pets, readAt }) => ({ pets, readAt }))
    },
    findById,
    rewrites: () =>
      pool.query<{ count: string | null }>({ name: 'pet-rewrites', text: `SELECT ${REWRITES_SQL} AS count` }).then(({ rows }) => {
        const count = rows[0]?.count
        return count === undefined || count === null ? undefined : Number(count)
      }),
  }
}
