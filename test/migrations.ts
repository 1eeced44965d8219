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

/** A Kysely on the test database of `env`, closed after `use`. */
export async function withKysely<T>(env: Record<string, string>, use: (db: Kysely<unknown>) => Promise<T>): Promise<T> {
  const database = loadConfig(env).database
  const db =
    database.engine === 'sqlite'
      ? new Kysely<unknown>({ dialect: new SqliteDialect({ database: new Sqlite(database.path) }) })
      : new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 1 }) }) })
  try {
    return await use(db)
  } finally {
    await db.destroy()
  }
}
