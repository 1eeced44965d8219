import Sqlite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import { loadConfig } from '../src/config.js'
import { postgresMigrations } from '../src/storage/migrations/postgres/index.js'
import type { PetstoreMigration } from '../src/storage/migrations/run-migrations.js'
import { sqliteMigrations } from '../src/storage/migrations/sqlite/index.js'
import { type Engine, storageEngine } from './helper.js'

// Migrating a test database part of the way, or further than this release, as another release would have.

/** This release's migrations of `engine`, by name. */
export function migrationsOf(engine: Engine): Record<string, PetstoreMigration> {
  return storageEngine(engine) === 'sqlite' ? sqliteMigrations : postgresMigrations
}

/**
 * A Kysely on the test database of `env`, closed after `use`; `use` is run again once on a connection
 * that the server ended with 57P01 (`terminating connection due to administrator command`) during a query,
 * and one so ended between two queries is replaced. The schema
 * tests open dozens of short connections a second, and one was so ended in about one run in six with
 * durability.test.ts beside them, by no statement of either file: the SIGTERM's sender was not found (the
 * likeliest, PostgreSQL's own `kill(-pid)` of a dropped database's backend on a recycled pid, with
 * pid_max at 32768 here). A schema read or a migration is safe to run again; what these tests judge is
 * the schema, not a lost connection, which the fault matrix covers.
 */
export async function withKysely<T>(env: Record<string, string>, use: (db: Kysely<unknown>) => Promise<T>): Promise<T> {
  try {
    return await withKyselyOnce(env, use)
  } catch (error) {
    if ((error as { code?: unknown }).code !== '57P01') throw error
    return withKyselyOnce(env, use)
  }
}

async function withKyselyOnce<T>(env: Record<string, string>, use: (db: Kysely<unknown>) => Promise<T>): Promise<T> {
  const database = loadConfig(env).database
  let db: Kysely<unknown>
  if (database.engine === 'sqlite') db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new Sqlite(database.path) }) })
  else {
    const pool = new pg.Pool({ connectionString: database.url, max: 1 })
    // Kysely lends the connection for each query and takes it back: ended so between two queries, it is reported
    // here, and unheard it would be an uncaught error. The pool drops it, and the next query opens another.
    pool.on('error', () => {})
    db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) })
  }
  try {
    return await use(db)
  } finally {
    await db.destroy()
  }
}
