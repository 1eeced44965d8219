import type { ApiKeysRepository } from '../api-keys/api-keys.repository.js'
import type { DatabaseConfig } from '../config.js'
import type { PetsRepository } from '../pets/pets.repository.js'
import { openSqliteStorage } from './sqlite/sqlite-storage.js'

/** Everything the service keeps, behind one interface; each engine lives in its own folder. */
export interface Storage {
  readonly engine: DatabaseConfig['engine']
  readonly pets: PetsRepository
  readonly apiKeys: ApiKeysRepository
  /** Applies pending migrations; safe to run again. Returns the names of those it applied. */
  migrate(): Promise<string[]>
  /** True for failures of the database itself (busy, full, read-only, gone): the client gets 503. */
  isUnavailable(error: unknown): boolean
  /** Resolves when the database answers a query. */
  ping(): Promise<void>
  close(): Promise<void>
}

export function openStorage(database: DatabaseConfig): Promise<Storage> {
  return Promise.resolve(openSqliteStorage(database.path))
}
