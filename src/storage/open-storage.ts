import type { DatabaseConfig } from '../config.js'
import type { Storage } from './storage.js'

/** Opens the configured engine. Nothing is created or migrated until `migrate()`. */
export async function openStorage(database: DatabaseConfig): Promise<Storage> {
  // Each engine's driver is loaded only when it is the configured one: memory is part of the budget.
  if (database.engine === 'sqlite') {
    const { openSqliteStorage } = await import('./sqlite/sqlite-storage.js')
    return openSqliteStorage(database.path)
  }
  const { openPostgresStorage } = await import('./postgres/postgres-storage.js')
  return openPostgresStorage(database.url, database.poolSize)
}

/**
 * Opens the configured engine and applies pending migrations: what every entry point does
 * first. A database that cannot be reached is reported as such, naming where its URL came from
 * (`named`, DATABASE_URL unless a command line option gave it).
 */
export async function openMigratedStorage(
  database: DatabaseConfig,
  named = 'DATABASE_URL',
): Promise<{ storage: Storage; applied: string[] }> {
  const storage = await openStorage(database)
  try {
    return { storage, applied: await storage.migrate() }
  } catch (error) {
    await storage.close().catch(() => {})
    if (!storage.isUnavailable(error) && !storage.isUnavailable((error as Error).cause)) throw error
    const reason = ((error as Error).cause as Error | undefined)?.message ?? (error as Error).message
    throw new Error(`cannot reach the database named by ${named}: ${reason}`, { cause: error })
  }
}
