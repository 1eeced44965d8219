import { type Kysely, sql } from 'kysely'
import { type Migration, Migrator } from 'kysely/migration'
import { type BreakingChange, COMPATIBILITY_TABLE } from './compatibility.js'

/** A migration module: Kysely's `up`, and, for a change older releases cannot run beside, its mark. */
export interface PetstoreMigration extends Migration {
  readonly breaks?: BreakingChange
}

/**
 * Applies the given migrations in name order through Kysely's migrator, which records them in
 * `schema_migrations`, and records the mark of each breaking one in `schema_compatibility`. Returns the
 * names it applied. `unknown` are the names a newer release applied, which this one runs beside. The
 * caller holds the transaction, and with it the lock that keeps two processes from migrating at once:
 * Kysely's would not hold behind a pooler.
 */
export async function runMigrations(db: Kysely<unknown>, migrations: Record<string, PetstoreMigration>, unknown: readonly string[]): Promise<string[]> {
  // Kysely refuses a history with names it was not given ("previously executed migration … is missing"):
  // a newer release's are given as already applied, never to run, and may sort before a pending one.
  const newer = Object.fromEntries(
    unknown.map((name): [string, Migration] => [name, { up: () => Promise.reject(new Error(`${name} belongs to a newer release`)) }]),
  )
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve({ ...newer, ...migrations }) },
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
    disableTransactions: true,
    allowUnorderedMigrations: true,
  })
  const { error, results = [] } = await migrator.migrateToLatest()
  if (error !== undefined) {
    throw new Error('Database migration failed', { cause: error })
  }
  const applied = results.filter((result) => result.status === 'Success').map((result) => result.migrationName)
  for (const name of applied) {
    const breaks = migrations[name]?.breaks
    if (breaks === undefined) continue
    await sql`CREATE TABLE IF NOT EXISTS ${sql.table(COMPATIBILITY_TABLE)} (
      migration VARCHAR(255) PRIMARY KEY,
      oldest_release VARCHAR(64) NOT NULL,
      reason TEXT NOT NULL
    )`.execute(db)
    await sql`INSERT INTO ${sql.table(COMPATIBILITY_TABLE)} (migration, oldest_release, reason)
      VALUES (${name}, ${breaks.oldestRelease}, ${breaks.reason})`.execute(db)
  }
  return applied
}
