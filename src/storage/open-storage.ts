import fs from 'node:fs'
import path from 'node:path'
import { ConfigError, type DatabaseConfig } from '../config.js'
import type { Storage, StorageLog } from './storage.js'

/**
 * Opens the configured engine. Nothing is migrated until `migrate()`. A SQLite file is created in its
 * folder if missing, but the folder only for the unset default: `named` (DATABASE_URL unless a command
 * line option gave the URL) is blamed for a folder that does not exist. `log` hears what the operator
 * should fix while the storage runs (a pooler that drops prepared statements, a SQLite file deleted).
 */
export async function openStorage(database: DatabaseConfig, named = 'DATABASE_URL', log?: StorageLog): Promise<Storage> {
  // Each engine's driver is loaded only when it is the configured one: memory is part of the budget.
  if (database.engine === 'sqlite') {
    if (database.createFolder === true) fs.mkdirSync(path.dirname(database.path), { recursive: true })
    else checkSqliteFolder(database, named)
    const { openSqliteStorage } = await import('./sqlite/sqlite-storage.js')
    return openSqliteStorage(database.path, { named, log })
  }
  const { openPostgresStorage } = await import('./postgres/postgres-storage.js')
  return openPostgresStorage({ ...database, warn: log === undefined ? undefined : (message) => log.warn(message) })
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
 * first. A database that cannot be reached is reported as such, naming where its URL came from
 * (`named`, DATABASE_URL unless a command line option gave it).
 */
export async function openMigratedStorage(
  database: DatabaseConfig,
  named = 'DATABASE_URL',
  log?: StorageLog,
): Promise<{ storage: Storage; applied: string[] }> {
  const storage = await openStorage(database, named, log)
  try {
    return { storage, applied: await storage.migrate() }
  } catch (error) {
    await storage.close().catch(() => {})
    if (!storage.isUnavailable(error) && !storage.isUnavailable((error as Error).cause)) throw error
    const reason = ((error as Error).cause as Error | undefined)?.message ?? (error as Error).message
    throw new Error(`cannot reach the database named by ${named}: ${reason}`, { cause: error })
  }
}
