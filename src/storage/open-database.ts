import fs from 'node:fs'
import path from 'node:path'
import { ConfigError, type DatabaseConfig, withoutPassword } from '../config.js'
import type { Database, StorageLog } from './database.js'
import { type MigrationState, migrationState, unknownMigrationsWarning } from './migrations/compatibility.js'
import { MIGRATION_NAMES } from './migrations/names.js'
import { makeDatabasePrivate, makePrivateFolder, unsafePermissions } from './sqlite/private-files.js'

/**
 * Opens the configured engine. Nothing is migrated until `migrate()`. A SQLite file is created in its
 * folder if missing, but the folder only for the unset default, each private to this user whatever the
 * umask (src/storage/sqlite/private-files.ts), and a database that other users could write is refused: `named` (DATABASE_URL unless a command
 * line option gave the URL) is blamed, with the path, for a folder that does not exist or cannot be made,
 * and for a file SQLite cannot open. `log` hears what the operator should fix while the storage runs (a
 * pooler that drops prepared statements, a SQLite file deleted).
 */
export async function openDatabase(database: DatabaseConfig, named = 'DATABASE_URL', log?: StorageLog): Promise<Database> {
  // Each engine's driver is loaded only when it is the configured one: memory is part of the budget.
  if (database.engine === 'sqlite') {
    if (database.createFolder === true) {
      try {
        makePrivateFolder(path.dirname(database.path))
      } catch (error) {
        throw new ConfigError(named, `${chosen(database)} whose folder cannot be created: ${(error as Error).message}`)
      }
    } else checkSqliteFolder(database, named)
    if (database.path !== ':memory:') {
      const unsafe = unsafePermissions(database.path)
      if (unsafe !== undefined) throw new ConfigError(named, `${chosen(database)} ${unsafe}`)
      makeDatabasePrivate(database.path, { ownFolder: database.createFolder === true })
    }
    const { openSqliteDatabase } = await import('./sqlite/sqlite-database.js')
    try {
      return openSqliteDatabase(database.path, { named, log })
    } catch (error) {
      throw namingDatabase(error, database, named, (cause) => hasCode(cause) && cause.code.startsWith('SQLITE_'))
    }
  }
  const { openPostgresDatabase } = await import('./postgres/postgres-database.js')
  return openPostgresDatabase({ ...database, warn: log === undefined ? undefined : (message) => log.warn(message) })
}

/** Throws, naming `named`, if `database` is a SQLite file whose folder does not exist (and is not to be made). */
export function checkSqliteFolder(database: DatabaseConfig, named: string): void {
  if (database.engine !== 'sqlite' || database.createFolder === true || database.path === ':memory:') return
  const folder = path.dirname(database.path)
  if (fs.existsSync(folder)) return
  throw new ConfigError(
    named,
    `names ${database.path}, in a folder that does not exist: create ${folder} first if the database belongs there (mkdir -p ${folder}), or correct the path`,
  )
}

/**
 * Opens the configured engine and applies pending migrations: what every entry point does
 * first. `log` hears the one warning of a database that a newer release migrated. A database that cannot be reached, or refuses the connection, is reported as such, naming
 * where its URL came from (`named`, DATABASE_URL unless a command line option gave it).
 */
export async function openMigratedDatabase(
  database: DatabaseConfig,
  named = 'DATABASE_URL',
  log?: StorageLog,
): Promise<{ database: Database; applied: string[] }> {
  const opened = await openDatabase(database, named, log)
  try {
    const { applied, unknown } = await opened.migrate()
    if (unknown.length > 0) log?.warn(unknownMigrationsWarning(unknown))
    return { database: opened, applied }
  } catch (error) {
    await opened.close().catch(() => {})
    throw namingDatabase(error, database, named, (cause) => opened.isUnavailable(cause))
  }
}

/**
 * The configured database's migrations against this release's, changing nothing: a SQLite file that does
 * not exist is not created, and has every migration pending. Failures are named as openMigratedDatabase's.
 */
export async function readMigrationState(database: DatabaseConfig, named = 'DATABASE_URL'): Promise<MigrationState> {
  if (database.engine === 'sqlite' && !fs.existsSync(database.path)) {
    return migrationState({ names: [], marks: [] }, MIGRATION_NAMES.sqlite)
  }
  const opened = await openDatabase(database, named)
  try {
    return await opened.migrationState()
  } catch (error) {
    throw namingDatabase(error, database, named, (cause) => opened.isUnavailable(cause))
  } finally {
    await opened.close().catch(() => {})
  }
}

/** What `named` chose, as the start of a message that goes on with `which` or `whose`. */
function chosen(database: DatabaseConfig): string {
  if (database.engine === 'postgres') return `names ${withoutPassword(database.url)},`
  return database.createFolder === true ? `is unset, so the database is ${database.path},` : `names ${database.path},`
}

/** What the operator should hear of a SQLite file that cannot be used, by the code SQLite gives. */
const SQLITE_FILE_PROBLEMS: [RegExp, (message: string) => string][] = [
  [/^SQLITE_CANTOPEN/, (message) => `which SQLite cannot open (${message}): name a file this user can read and write, or a new one in a folder it can write`],
  [/^SQLITE_NOTADB/, (message) => `which is not a SQLite database (${message})`],
  [/^SQLITE_CORRUPT/, (message) => `which is damaged (${message}): restore it from a backup`],
  [
    /^SQLITE_READONLY/,
    (message) => `which this user cannot write (${message}): the file and its folder, where SQLite keeps its -wal and -shm files, must be writable`,
  ],
]

// PostgreSQL's SQLSTATE class 28 (a wrong password, a user or address its pg_hba.conf does not admit)
// and 3D000 (no such database): the URL is wrong, and retrying will not help.
const REFUSED_CONNECTION = /^(28|3D000)/

/**
 * `error`, met while opening or migrating `database`, naming `named` and what it chose (the file, or the
 * URL without its user and password). A file SQLite cannot use and a server that refuses the connection are the
 * configuration's to fix, so they are a ConfigError; a database that is `unavailable` may come back.
 * Anything else is not the database's and is returned as it is.
 */
function namingDatabase(error: unknown, database: DatabaseConfig, named: string, unavailable: (cause: unknown) => boolean): unknown {
  const cause = [error, (error as Error | undefined)?.cause].find(hasCode)
  if (cause !== undefined) {
    const problem =
      database.engine === 'sqlite'
        ? SQLITE_FILE_PROBLEMS.find(([code]) => code.test(cause.code))?.[1](cause.message)
        : REFUSED_CONNECTION.test(cause.code)
          ? `whose server refuses the connection: ${cause.message}`
          : undefined
    if (problem !== undefined) return new ConfigError(named, `${chosen(database)} ${problem}`)
  }
  if (!unavailable(error) && !unavailable((error as Error | undefined)?.cause)) return error
  const reason = ((error as Error).cause as Error | undefined)?.message ?? (error as Error).message
  const file = database.engine === 'sqlite' ? ` (${database.path})` : ''
  return new Error(`cannot reach the database named by ${named}${file}: ${reason}`, { cause: error })
}

/** An error with a code of its driver (`SQLITE_…`, a SQLSTATE) or of the system. */
function hasCode(value: unknown): value is Error & { code: string } {
  return value instanceof Error && typeof (value as { code?: unknown }).code === 'string'
}
