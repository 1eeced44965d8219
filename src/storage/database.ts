import type { Database as SqliteHandle } from 'better-sqlite3'
import type pg from 'pg'
import type { DatabaseConfig } from '../config.js'
import type { MigrationState } from './migrations/compatibility.js'
import type { ReplicaSet, ReplicaStats } from './postgres/replica-set.js'

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

/** What every engine does, whatever is kept in it. */
export interface DatabaseOperations {
  readonly engine: DatabaseConfig['engine']
  /** The database's migrations against those this release knows, read without changing anything. */
  migrationState(): Promise<MigrationState>
  /**
   * Applies pending migrations; safe to run again. Refuses, with an IncompatibleDatabaseError, a database
   * whose breaking migrations need a release newer than `release` (this one's by default). Returns the
   * names it applied, and those a newer release applied, which this one runs beside.
   */
  migrate(release?: string): Promise<{ applied: string[]; unknown: string[] }>
  /** True for failures of the database itself (busy, full, read-only, gone): the client gets 503. */
  isUnavailable(error: unknown): boolean
  /**
   * True for those unavailable failures that are this instance's load, not the database's: a query that waited
   * its whole time for a connection of a pool whose connections were answering others. The client gets 503
   * `overloaded`, as from the load shedding.
   */
  isOverloaded(error: unknown): boolean
  /** Resolves when the database answers a query; rejects with a `StorageFault` when it can name the reason. */
  ping(): Promise<void>
  /**
   * SQLite only: copies one consistent snapshot of the database to `file` while other connections
   * keep writing, calling `progress` after each step. PostgreSQL has pg_dump.
   */
  backup?(file: string, progress: (copiedPages: number, totalPages: number) => void): Promise<void>
  /** The connection pool's figures, for the metrics; engines without a pool have none. */
  poolStats?(): PoolStats
  /** PostgreSQL with standbys only: each standby's lag and state, and where reads went, for the metrics. */
  replicaStats?(): ReplicaStats
  close(): Promise<void>
}

/** A SQLite file, opened: `db` for the repositories, which prepare their statements after `migrate()`. */
export interface SqliteDatabase extends DatabaseOperations {
  readonly engine: 'sqlite'
  readonly db: SqliteHandle
  /** Throws a `StorageFault` once the file is no longer the one opened; the repositories' writes call it (`guardWrites`). */
  readonly checkFile: () => void
}

/** A pool of connections to a PostgreSQL server or pooler. */
export interface PostgresDatabase extends DatabaseOperations {
  readonly engine: 'postgres'
  readonly pool: pg.Pool
  /** The standbys of DATABASE_REPLICA_URLS, which reads may go to; absent without any. */
  readonly replicas?: ReplicaSet
}

/**
 * An engine, opened; it knows nothing of what the features keep there (src/repositories.ts composes
 * them). Each engine lives in its own folder, and open-database.ts picks one.
 */
export type Database = SqliteDatabase | PostgresDatabase
