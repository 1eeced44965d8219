import pg from 'pg'
import { createPostgresApiKeysRepository } from '../../api-keys/api-keys.repository.postgres.js'
import { createPostgresCopyRepository } from '../../copy/copy.repository.postgres.js'
import { createPostgresDeprecationsRepository } from '../../deprecations/deprecations.repository.postgres.js'
import { createPostgresIdempotencyRepository } from '../../idempotency/idempotency.repository.postgres.js'
import { createPostgresPetsRepository } from '../../pets/pets.repository.postgres.js'
import { MIGRATION_NAMES, upToDate } from '../migrations/names.js'
import type { Storage } from '../storage.js'

// SQLSTATE classes that mean "the database cannot serve now", not "this request is wrong":
// 08 connection exception, 53 insufficient resources, 57P operator intervention (shutdown,
// restart), 25006 read-only transaction (a failover in progress), 40 serialization/deadlock,
// 55P03 a lock not granted within lock_timeout.
const UNAVAILABLE_SQLSTATE = /^(08|53|57P|25006|40001|40P01|55P03)/
const NETWORK_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH'])
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error',
  'Cannot use a pool after calling end',
]

function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || NETWORK_ERRORS.has(code))) return true
  return UNAVAILABLE_MESSAGES.some((message) => error.message.includes(message))
}

/** The names in Kysely's `schema_migrations`, none before the first migration made it. */
async function recordedMigrations(pool: pg.Pool): Promise<string[]> {
  try {
    const { rows } = await pool.query<{ name: string }>('SELECT name FROM schema_migrations')
    return rows.map((row) => row.name)
  } catch (error) {
    // 42P01 undefined_table: a database never migrated.
    if ((error as { code?: unknown }).code === '42P01') return []
    throw error
  }
}

/** A pool of `poolSize` connections to the PostgreSQL server of `url`. */
export function openPostgresStorage(url: string, poolSize: number): Storage {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    query_timeout: 15_000,
  })
  // An idle connection whose server goes away reports here; unheard, the error would crash the
  // process. The pool drops that connection and the next query meets the outage (a 503) instead.
  pool.on('error', () => {})
  let ended = false

  return {
    engine: 'postgres',
    pets: createPostgresPetsRepository(pool),
    apiKeys: createPostgresApiKeysRepository(pool),
    idempotency: createPostgresIdempotencyRepository(pool),
    deprecations: createPostgresDeprecationsRepository(pool),
    copy: createPostgresCopyRepository(pool),
    async migrate() {
      if (upToDate(await recordedMigrations(pool), MIGRATION_NAMES.postgres)) return []
      const [{ Kysely, PostgresDialect }, { runMigrations }, { postgresMigrations }] = await Promise.all([
        import('kysely'),
        import('../migrations/run-migrations.js'),
        import('../migrations/postgres/index.js'),
      ])
      // Kysely holds a PostgreSQL advisory lock while it migrates, so instances starting at once
      // apply each migration exactly once. It is not destroyed: that would end the shared pool.
      const kysely = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) })
      return runMigrations(kysely, postgresMigrations)
    },
    isUnavailable,
    async ping() {
      await pool.query('SELECT 1')
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: poolSize }),
    async close() {
      if (ended) return
      ended = true
      await pool.end()
    },
  }
}
