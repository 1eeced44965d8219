import type { ApiKeysRepository } from '../api-keys/api-keys.repository.js'
import type { DatabaseConfig } from '../config.js'
import type { CopyRepository } from '../copy/copy.repository.js'
import type { DeprecationsRepository } from '../deprecations/deprecations.repository.js'
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js'
import type { PetsRepository } from '../pets/pets.repository.js'

/** Where an engine tells the operator what to fix while it runs; the service's logger is one. */
export interface StorageLog {
  warn(message: string): void
  error(message: string): void
}

/**
 * The database cannot serve for a reason readiness names to its prober: the message carries no
 * path or other internals (the log has them). The engine that throws it counts it in `isUnavailable`.
 */
export class StorageFault extends Error {
  override readonly name = 'StorageFault'
}

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

/**
 * Everything the service keeps, behind one interface; each engine lives in its own folder and
 * open-storage.ts picks one. This file only declares, so that the engines can import it without a cycle.
 */
export interface Storage {
  readonly engine: DatabaseConfig['engine']
  readonly pets: PetsRepository
  readonly apiKeys: ApiKeysRepository
  readonly idempotency: IdempotencyRepository
  readonly deprecations: DeprecationsRepository
  /** Whole tables in and out, for `petstore copy`. */
  readonly copy: CopyRepository
  /** Applies pending migrations; safe to run again. Returns the names of those it applied. */
  migrate(): Promise<string[]>
  /** True for failures of the database itself (busy, full, read-only, gone): the client gets 503. */
  isUnavailable(error: unknown): boolean
  /** Resolves when the database answers a query; rejects with a `StorageFault` when it can name the reason. */
  ping(): Promise<void>
  /**
   * SQLite only: copies one consistent snapshot of the database to `file` while other connections
   * keep writing, calling `progress` after each step. PostgreSQL has pg_dump.
   */
  backup?(file: string, progress: (copiedPages: number, totalPages: number) => void): Promise<void>
  /** The connection pool's figures, for the metrics; engines without a pool have none. */
  poolStats?(): PoolStats
  close(): Promise<void>
}
