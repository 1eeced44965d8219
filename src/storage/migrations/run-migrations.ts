import { type Kysely, type Migration, Migrator } from 'kysely'

/**
 * Applies the given migrations in name order through Kysely's migrator, which records them in
 * `schema_migrations`. Returns the names it applied. The caller holds the transaction, and with it
 * the lock that keeps two processes from migrating at once: Kysely's would not hold behind a pooler.
 */
export async function runMigrations(db: Kysely<unknown>, migrations: Record<string, Migration>): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve(migrations) },
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
    disableTransactions: true,
  })
  const { error, results = [] } = await migrator.migrateToLatest()
  if (error !== undefined) {
    throw new Error('Database migration failed', { cause: error })
  }
  return results.filter((result) => result.status === 'Success').map((result) => result.migrationName)
}
