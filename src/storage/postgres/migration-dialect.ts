import { PostgresAdapter, PostgresDialect } from 'kysely'
import type pg from 'pg'

/** Kysely's PostgreSQL adapter without its migration lock: the caller holds one (postgres-database.ts). */
class LockedByCaller extends PostgresAdapter {
  override async acquireMigrationLock(): Promise<void> {}
  override async releaseMigrationLock(): Promise<void> {}
}

/**
 * A Kysely dialect whose every query goes to `client`, in the transaction the caller opened on it.
 * Kysely's own lock is left out: it is session-level, so through a pooler in transaction mode it
 * can be taken on one server connection while the migrations run on another, and a session lock
 * taken in a transaction that then fails outlives the rollback.
 */
export class MigrationDialect extends PostgresDialect {
  constructor(client: pg.PoolClient) {
    const held = { query: client.query.bind(client), release: () => {} }
    // `options` are a pool's settings, which Kysely reads only to open a connection that cancels a query: none here.
    super({ pool: { connect: () => Promise.resolve(held), end: () => Promise.resolve(), options: {} } })
  }

  override createAdapter(): PostgresAdapter {
    return new LockedByCaller()
  }
}
