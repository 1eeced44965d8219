// The PostgreSQL run's pets, on the service's own tables (made by its migrations), as the baselines
// (baseline-postgres.ts) and the floor (floor.ts) both read and write them: what a bare implementation
// would send, a keyset SELECT per page, a SELECT by id, an INSERT … RETURNING id, each a prepared (named)
// statement, through a pool the size of the service's default (DATABASE_POOL_SIZE 10). One module, so the
// SQL and the pool are the same wherever they are measured. Two drivers: node-postgres (`pg`, what the
// service uses) and porsager/postgres.js (`postgres`: pipelined, prepared by default). Both return int8 as
// text, written into the JSON as it came: ids stay exact.
import pg from 'pg'
import postgres from 'postgres'
import type { BaselineStore, NewPet, PetStatus } from './baseline-http.js'

export const POOL_SIZE = 10

/** A store on the database, and how to close its connections. */
export interface PostgresStore {
  store: BaselineStore
  end: () => Promise<void>
}

interface PetRow {
  id: string
  name: string
  category_id: string
  status: PetStatus | null
}

/** The service's bytes: key order id, name, categoryId, status; no status member when there is none. */
function petJson(row: PetRow): string {
  const status = row.status === null ? '' : `,"status":"${row.status}"`
  return `{"id":${row.id},"name":${JSON.stringify(row.name)},"categoryId":${row.category_id}${status}}`
}

function pageJson(rows: readonly PetRow[]): string {
  let body = '['
  for (let index = 0; index < rows.length; index++) body += (index === 0 ? '' : ',') + petJson(rows[index] as PetRow)
  return body + ']'
}

/** The 201 body of a pet the database just gave this id. */
function createdJson(id: string, pet: NewPet): { id: string; body: string } {
  return { id, body: petJson({ id, name: pet.name, category_id: String(pet.categoryId), status: pet.status ?? null }) }
}

const insertValues = (pet: NewPet) => [pet.name, pet.categoryId, pet.status ?? null, Date.now()]

const COLUMNS = 'id, name, category_id, status'
const LIST = `SELECT ${COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`
const LIST_BY_STATUS = `SELECT ${COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`
const BY_ID = `SELECT ${COLUMNS} FROM pets WHERE id = $1`
const INSERT = 'INSERT INTO pets (name, category_id, status, created_at) VALUES ($1, $2, $3, $4) RETURNING id'

/** Through node-postgres: the PostgreSQL baseline every ratio is against, and the floor's store. */
export function nodePostgresStore(url: string): PostgresStore {
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE })
  return {
    store: {
      list: (limit, status) =>
        (status === undefined
          ? pool.query<PetRow>({ name: 'list', text: LIST, values: ['0', limit] })
          : pool.query<PetRow>({ name: 'list-by-status', text: LIST_BY_STATUS, values: [status, '0', limit] })
        ).then(({ rows }) => pageJson(rows)),
      get: (id) => pool.query<PetRow>({ name: 'by-id', text: BY_ID, values: [id] }).then(({ rows }) => (rows[0] === undefined ? undefined : petJson(rows[0]))),
      create: (pet) => pool.query<{ id: string }>({ name: 'insert', text: INSERT, values: insertValues(pet) }).then(({ rows }) => createdJson(rows[0]?.id ?? '', pet)),
    },
    end: () => pool.end(),
  }
}

/** Through postgres.js: the driver comparison's other side. */
export function postgresJsStore(url: string): PostgresStore {
  // int8 comes back as text unless a bigint type is configured: kept so, never a lossy number.
  const sql = postgres(url, { max: POOL_SIZE, prepare: true, onnotice: () => {} })
  return {
    store: {
      list: (limit, status) =>
        (status === undefined
          ? sql.unsafe<PetRow[]>(LIST, ['0', limit], { prepare: true })
          : sql.unsafe<PetRow[]>(LIST_BY_STATUS, [status, '0', limit], { prepare: true })
        ).then(pageJson),
      get: (id) => sql.unsafe<PetRow[]>(BY_ID, [id], { prepare: true }).then((rows) => (rows[0] === undefined ? undefined : petJson(rows[0]))),
      create: (pet) => sql.unsafe<{ id: string }[]>(INSERT, insertValues(pet), { prepare: true }).then((rows) => createdJson(rows[0]?.id ?? '', pet)),
    },
    end: () => sql.end({ timeout: 1 }),
  }
}
