import type { ApiKeysRepository } from '../api-keys/api-keys.repository.js'
import type { DatabaseConfig } from '../config.js'
import type { DeprecationsRepository } from '../deprecations/deprecations.repository.js'
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js'
import type { PetsRepository } from '../pets/pets.repository.js'

/** A connection pool at one instant. */
export interface PoolStats {
  /** Connections open, idle or lent to a query. */
  total: number
  idle: number
  /** Queries waiting for a connection. */
  waiting: number
  /** The most connections the pool opens. */
  max: number
}

/** Everything the service keeps, behind one interface; each engine lives in its own folder. */
export interface Storage {
  readonly engine: DatabaseConfig['engine']
  readonly pets: PetsRepository
  readonly apiKeys: ApiKeysRepository
  readonly idempotency: IdempotencyRepository
  readonly deprecations: DeprecationsRepository
  /** Applies pending migrations; safe to run again. Returns the names of those it applied. */
  migrate(): Promise<string[]>
  /** True for failures of the database itself (busy, full, read-only, gone): the client gets 503. */
  isUnavailable(error: unknown): boolean
  /** Resolves when the database answers a query. */
  ping(): Promise<void>
  /** The connection pool's figures, for the metrics; engines without a pool have none. */
  poolStats?(): PoolStats
  close(): Promise<void>
}

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
 * first. A database that cannot be reached is reported as such, naming DATABASE_URL.
 */
export async function openMigratedStorage(database: DatabaseConfig): Promise<{ storage: Storage; applied: string[] }> {
  const storage = await openStorage(database)
  try {
    return { storage, applied: await storage.migrate() }
  } catch (error) {
    await storage.close().catch(() => {})
    if (!storage.isUnavailable(error) && !storage.isUnavailable((error as Error).cause)) throw error
    const reason = ((error as Error).cause as Error | undefined)?.message ?? (error as Error).message
    throw new Error(`cannot reach the database named by DATABASE_URL: ${reason}`, { cause: error })
  }
}
