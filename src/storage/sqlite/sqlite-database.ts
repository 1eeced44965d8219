import Sqlite from 'better-sqlite3'
import { type SqliteDatabase, StorageFault, type StorageLog } from '../database.js'
import { COMPATIBILITY_TABLE, type CompatibilityMark, type RecordedMigrations, assertAllowed, migrationState } from '../migrations/compatibility.js'
import { MIGRATION_NAMES } from '../migrations/names.js'
import { releaseVersion } from '../../shared/release.js'
import { guardDatabaseFile } from './database-file.js'
import { inTransaction } from './transaction.js'

// Failures of the database file or its host, not of the request: the client may retry later.
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|READONLY|IOERR|CANTOPEN|PROTOCOL|NOMEM|CORRUPT|NOTADB)/

function isUnavailable(error: unknown): boolean {
  if (error instanceof Sqlite.SqliteError) return UNAVAILABLE.test(error.code)
  if (error instanceof StorageFault) return true
  return error instanceof TypeError && error.message === 'The database connection is not open'
}

/** The names in Kysely's `schema_migrations` and the marks of breaking ones: none before a migration made their table. */
function recordedMigrations(db: Sqlite.Database): RecordedMigrations {
  const has = (table: string) => db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) !== undefined
  return {
    names: has('schema_migrations') ? db.prepare<[], string>('SELECT name FROM schema_migrations').pluck().all() : [],
    marks: has(COMPATIBILITY_TABLE)
      ? db.prepare<[], CompatibilityMark>(`SELECT migration, oldest_release AS oldestRelease, reason FROM ${COMPATIBILITY_TABLE}`).all()
      : [],
  }
}

/** How long a new connection's first statement is tried again when SQLite answers busy without waiting. */
const OPEN_BUSY_MS = 5_000

/**
 * Puts the file in WAL mode: the connection's first statement. SQLite answers it SQLITE_BUSY at once, without
 * its busy handler, while another process's last connection to the file closes (it cleans the WAL up under an
 * exclusive lock) or one recovers the WAL (https://sqlite.org/wal.html, "Sometimes Queries Return SQLITE_BUSY"):
 * as when instances start and `petstore migrate` runs at once. Tried again until OPEN_BUSY_MS has passed.
 */
function enterWal(db: Sqlite.Database): void {
  const deadline = performance.now() + OPEN_BUSY_MS
  for (;;) {
    try {
      db.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if (!(error instanceof Sqlite.SqliteError && error.code.startsWith('SQLITE_BUSY')) || performance.now() > deadline) throw error
      // Opening is synchronous: the thread waits 10 ms.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10)
    }
  }
}

/** Pages copied per turn of the event loop by `backup` (4 KiB each: 4 MiB). */
const BACKUP_PAGES_PER_STEP = 1024

/**
 * Opens (creating if needed) the SQLite file in a folder that exists. Statements on the features' tables
 * are prepared after `migrate()`. `named` is the variable that gave `file`, for the log.
 */
export function openSqliteDatabase(file: string, { named = 'DATABASE_URL', log }: { named?: string; log?: StorageLog } = {}): SqliteDatabase {
  const db = new Sqlite(file)
  const checkFile = guardDatabaseFile(db, file, () =>
    log?.error(
      `${named} names ${file}, which is no longer the database file the service opened (deleted, renamed, replaced, ` +
        'a symlink swapped, or its -wal file deleted): writes, reads and readiness are refused until the service is restarted',
    ),
  )
  enterWal(db)
  // FULL: a commit is on disk before the 201 leaves, even across power loss, not only a crash.
  db.pragma('synchronous = FULL')
  db.pragma('busy_timeout = 5000')
  db.pragma('foreign_keys = ON')

  const ping = db.prepare('SELECT 1')

  return {
    engine: 'sqlite',
    db,
    checkFile,
    async migrationState() {
      return migrationState(recordedMigrations(db), MIGRATION_NAMES.sqlite)
    },
    async migrate(release = releaseVersion()) {
      const state = migrationState(recordedMigrations(db), MIGRATION_NAMES.sqlite)
      assertAllowed(state, release)
      // Kysely and the migrations are loaded only to apply one: memory the server would keep for nothing (ADR 2).
      if (state.pending.length === 0) return { applied: [], unknown: state.unknown }
      const [{ Kysely, SqliteDialect }, { runMigrations }, { sqliteMigrations }] = await Promise.all([
        import('kysely'),
        import('../migrations/run-migrations.js'),
        import('../migrations/sqlite/index.js'),
      ])
      // Kysely only drives the migrations; it is not destroyed because that would close `db`.
      const kysely = new Kysely<unknown>({ dialect: new SqliteDialect({ database: db }) })
      // Kysely takes no lock on SQLite. Another process may be migrating the same file (several
      // instances starting at once): IMMEDIATE takes the write lock first, waiting up to the busy
      // timeout, so each migration is applied once, and all of them atomically.
      return inTransaction(db, 'BEGIN IMMEDIATE', async () => {
        const locked = migrationState(recordedMigrations(db), MIGRATION_NAMES.sqlite)
        assertAllowed(locked, release)
        return { applied: await runMigrations(kysely, sqliteMigrations, locked.unknown), unknown: locked.unknown }
      })
    },
    async backup(file, progress) {
      // SQLite's backup restarts whenever another connection writes between its steps, which under a
      // steady stream of creates would be for ever. A read transaction held open for the whole copy
      // pins one WAL snapshot: writers go on, and the copy is the database as of its first step.
      await inTransaction(db, 'BEGIN', async () => {
        db.prepare('SELECT count(*) FROM sqlite_master').get()
        // `progress` is asked before each step; the result says how the last one ended.
        const done = await db.backup(file, {
          progress: ({ totalPages, remainingPages }) => {
            progress(totalPages - remainingPages, totalPages)
            return BACKUP_PAGES_PER_STEP
          },
        })
        progress(done.totalPages - done.remainingPages, done.totalPages)
      })
    },
    isUnavailable,
    // One connection, no pool to wait for: SQLite busy past its timeout is another process's lock (unavailable).
    isOverloaded: () => false,
    async ping() {
      checkFile()
      ping.get()
    },
    close() {
      if (db.open) db.close()
      return Promise.resolve()
    },
  }
}
