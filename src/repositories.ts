import { createPostgresApiKeysRepository } from './api-keys/api-keys.repository.postgres.js'
import type { ApiKeysRepository } from './api-keys/api-keys.repository.js'
import { createSqliteApiKeysRepository } from './api-keys/api-keys.repository.sqlite.js'
import type { DatabaseConfig } from './config.js'
import { createPostgresCopyRepository } from './copy/copy.repository.postgres.js'
import type { CopyRepository } from './copy/copy.repository.js'
import { createSqliteCopyRepository } from './copy/copy.repository.sqlite.js'
import { createPostgresDeprecationsRepository } from './deprecations/deprecations.repository.postgres.js'
import type { DeprecationsRepository } from './deprecations/deprecations.repository.js'
import { createSqliteDeprecationsRepository } from './deprecations/deprecations.repository.sqlite.js'
import { createPostgresIdempotencyRepository } from './idempotency/idempotency.repository.postgres.js'
import type { IdempotencyRepository } from './idempotency/idempotency.repository.js'
import { createSqliteIdempotencyRepository } from './idempotency/idempotency.repository.sqlite.js'
import { createPostgresPetsRepository } from './pets/pets.repository.postgres.js'
import type { PetsRepository } from './pets/pets.repository.js'
import { createSqlitePetsRepository, trackSqlitePetChanges } from './pets/pets.repository.sqlite.js'
import type { Database, DatabaseOperations, PostgresDatabase, SqliteDatabase, StorageLog } from './storage/database.js'
import { openDatabase, openMigratedDatabase } from './storage/open-database.js'
import { guardWrites } from './storage/sqlite/database-file.js'

/*
 * The one place that knows both the engines (src/storage/, which knows no feature) and the features'
 * repositories (one per engine in each feature's folder): it puts an engine's repositories together on
 * the database it opened. A new engine adds a branch here; a new feature, a member of Repositories.
 */

/** What the features keep, each in its own repository. */
interface Repositories {
  readonly pets: PetsRepository
  readonly apiKeys: ApiKeysRepository
  readonly idempotency: IdempotencyRepository
  readonly deprecations: DeprecationsRepository
  /** Whole tables in and out, for `petstore copy`. */
  readonly copy: CopyRepository
}

/** Everything the service keeps, on one engine: the features' repositories and the engine's own operations. */
export type Storage = Repositories & DatabaseOperations

export interface StorageOptions {
  /** Wraps each repository a request uses, on an engine no instrumentation covers (SQLite), in spans naming its table (src/tracing). */
  traceRepository?: <R extends object>(repository: R, table: string) => R
}

type Makers = { readonly [K in keyof Repositories]: () => Repositories[K] }

/** The repositories of the features on `database`. */
function storageOn(database: Database, options: StorageOptions = {}): Storage {
  return withRepositories(database, database.engine === 'sqlite' ? sqliteRepositories(database, options) : postgresRepositories(database))
}

function postgresRepositories({ pool, replicas }: PostgresDatabase): Makers {
  return {
    pets: () => createPostgresPetsRepository(pool, replicas),
    apiKeys: () => createPostgresApiKeysRepository(pool, replicas),
    idempotency: () => createPostgresIdempotencyRepository(pool),
    deprecations: () => createPostgresDeprecationsRepository(pool),
    copy: () => createPostgresCopyRepository(pool),
  }
}

function sqliteRepositories({ db, checkFile }: SqliteDatabase, { traceRepository = (repository) => repository }: StorageOptions): Makers {
  const petChanges = trackSqlitePetChanges(db)
  // Every write checks that the file is still the one opened, before and once committed (database-file.ts).
  return {
    // Creates are checked per group commit, by the repository.
    pets: () => traceRepository(guardWrites(createSqlitePetsRepository(db, petChanges, checkFile), ['createOnce'], checkFile), 'pets'),
    apiKeys: () => traceRepository(guardWrites(createSqliteApiKeysRepository(db), ['insert', 'rotate', 'revoke', 'touch'], checkFile), 'api_keys'),
    idempotency: () => traceRepository(guardWrites(createSqliteIdempotencyRepository(db), ['prune'], checkFile), 'idempotency_keys'),
    deprecations: () => traceRepository(guardWrites(createSqliteDeprecationsRepository(db), ['add'], checkFile), 'deprecated_calls'),
    copy: () => createSqliteCopyRepository(db),
  }
}

/** Made on first use: SQLite prepares a repository's statements, which needs its tables, after `migrate()`. */
function once<T>(make: () => T): () => T {
  let made: T | undefined
  return () => (made ??= make())
}

function withRepositories(database: Database, make: Makers): Storage {
  const [pets, apiKeys, idempotency, deprecations, copy] = [once(make.pets), once(make.apiKeys), once(make.idempotency), once(make.deprecations), once(make.copy)]
  const [backup, poolStats, replicaStats] = [database.backup?.bind(database), database.poolStats?.bind(database), database.replicaStats?.bind(database)]
  return {
    engine: database.engine,
    migrate: database.migrate.bind(database),
    migrationState: database.migrationState.bind(database),
    isUnavailable: database.isUnavailable.bind(database),
    isOverloaded: database.isOverloaded.bind(database),
    ping: database.ping.bind(database),
    close: database.close.bind(database),
    ...(backup === undefined ? {} : { backup }),
    ...(poolStats === undefined ? {} : { poolStats }),
    ...(replicaStats === undefined ? {} : { replicaStats }),
    get pets() {
      return pets()
    },
    get apiKeys() {
      return apiKeys()
    },
    get idempotency() {
      return idempotency()
    },
    get deprecations() {
      return deprecations()
    },
    get copy() {
      return copy()
    },
  }
}

/** Opens the configured engine with the features' repositories on it: see openDatabase. */
export async function openStorage(config: DatabaseConfig, named = 'DATABASE_URL', log?: StorageLog, options?: StorageOptions): Promise<Storage> {
  return storageOn(await openDatabase(config, named, log), options)
}

/** Opens the configured engine, applies pending migrations, and puts the repositories on it: see openMigratedDatabase. */
export async function openMigratedStorage(
  config: DatabaseConfig,
  named = 'DATABASE_URL',
  log?: StorageLog,
  options?: StorageOptions,
): Promise<{ storage: Storage; applied: string[] }> {
  const { database, applied } = await openMigratedDatabase(config, named, log)
  return { storage: storageOn(database, options), applied }
}
