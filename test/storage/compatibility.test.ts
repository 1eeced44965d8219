import assert from 'node:assert/strict'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { sql } from 'kysely'
import { loadConfig } from '../../src/config.js'
import { openStorage } from '../../src/repositories.js'
import { releaseVersion } from '../../src/shared/release.js'
import {
  type CompatibilityMark,
  IncompatibleDatabaseError,
  allows,
  assertAllowed,
  migrationState,
} from '../../src/storage/migrations/compatibility.js'
import { MIGRATION_NAMES } from '../../src/storage/migrations/names.js'
import { type PetstoreMigration, runMigrations } from '../../src/storage/migrations/run-migrations.js'
import { DIRECT_ENGINES, ENGINES, type Engine, createTestDatabase, storageEngine } from '../helper.js'
import { migrationsOf, withKysely } from '../migrations.js'
import { cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

/*
 * The schema's compatibility window (ADR 22): this release runs on a database that a newer release
 * migrated, as long as none of the newer migrations is marked as breaking, and refuses, in one line, one
 * that a newer release marked as needing a release newer than this one.
 */

after(cleanupProcesses)

const NEWER = '0099-pet-photos'
const BREAKING = '0100-drop-pet-legacy-name'

/** An expand-only migration of a newer release: a new table, and a nullable column on `pets`. */
const expandOnly: PetstoreMigration = {
  async up(db) {
    await sql`CREATE TABLE pet_photos (id INTEGER PRIMARY KEY, pet_id BIGINT NOT NULL, url TEXT NOT NULL)`.execute(db)
    await sql`ALTER TABLE pets ADD COLUMN nickname TEXT`.execute(db)
  },
}

/** A breaking migration of a newer release, marked: releases before `oldestRelease` must not run beside it. */
function breaking(oldestRelease: string): PetstoreMigration {
  return {
    async up(db) {
      await sql`CREATE TABLE pet_legacy (id INTEGER PRIMARY KEY)`.execute(db)
      await sql`DROP TABLE pet_legacy`.execute(db)
    },
    breaks: { oldestRelease, reason: 'drops pets.legacy_name' },
  }
}

/** Migrates `env`'s database as a newer release would: every migration of this one, then `newer`'s. */
async function migrateAsNewerRelease(engine: Engine, env: Record<string, string>, newer: Record<string, PetstoreMigration>): Promise<string[]> {
  return withKysely(env, (db) => runMigrations(db, { ...migrationsOf(engine), ...newer }, []))
}

const mark = (oldestRelease: string, migration = BREAKING): CompatibilityMark => ({ migration, oldestRelease, reason: 'drops pets.legacy_name' })

describe('the compatibility window, as a rule', () => {
  const known = ['0001-a', '0002-b']
  // [release, marks, allowed]: semantic versions compare by number, and the newest mark is the one that counts.
  const cases: [string, CompatibilityMark[], boolean][] = [
    ['1.1.0', [], true],
    ['1.1.0', [mark('1.1.0')], true],
    ['1.1.0', [mark('1.0.9')], true],
    ['1.1.0', [mark('1.1.1')], false],
    ['1.9.0', [mark('1.10.0')], false],
    ['1.10.0', [mark('1.9.0')], true],
    ['2.0.0', [mark('1.10.0'), mark('1.2.0', '0099-older')], true],
    ['1.5.0', [mark('1.2.0', '0099-older'), mark('1.10.0')], false],
    ['1.3.0-rc.1', [mark('1.3.0')], false],
  ]
  for (const [release, marks, allowed] of cases) {
    it(`${allowed ? 'lets' : 'refuses'} ${release} with marks ${marks.map((m) => m.oldestRelease).join(', ') || 'none'}`, () => {
      const state = migrationState({ names: [...known, ...marks.map((m) => m.migration)], marks }, known)
      assert.equal(allows(state, release), allowed)
      if (allowed) assertAllowed(state, release)
      else {
        assert.throws(
          () => assertAllowed(state, release),
          (error: Error) => error instanceof IncompatibleDatabaseError && !error.message.includes('\n') && error.message.includes(`needs petstore 1.`),
        )
      }
    })
  }

  it('sorts a database\'s names into applied, pending and unknown', () => {
    const state = migrationState({ names: ['0001-a', '0003-newer', '0000-older-newer'], marks: [] }, known)
    assert.deepEqual(state, { applied: ['0001-a'], pending: ['0002-b'], unknown: ['0000-older-newer', '0003-newer'], oldestRelease: undefined })
  })
})

for (const engine of ENGINES) {
  describe(`a database a newer release migrated (${engine})`, () => {
    it('is served by this release, which applies nothing and names the newer migration', async (t) => {
      const database = await createTestDatabase(engine, trackedTempDir('petstore-compatibility-'))
      await migrateAsNewerRelease(engine, database.env, { [NEWER]: expandOnly })
      const storage = await openStorage(loadConfig(database.env).database)
      // Closed before the database is dropped, which ends the connections still open (hooks run in order).
      t.after(() => storage.close())
      t.after(() => database.drop())
      assert.deepEqual(await storage.migrate(), { applied: [], unknown: [NEWER] })
      const pet = await storage.pets.create({ name: 'Rex', categoryId: 1n, status: 'available' }, Date.now())
      assert.deepEqual((await storage.pets.findById(pet.id)).pet, pet)
      assert.deepEqual((await storage.pets.list({ limit: 5, afterId: 0n })).pets, [pet])
    })

    it('applies its own pending migrations beside a newer release\'s', async (t) => {
      const database = await createTestDatabase(engine, trackedTempDir('petstore-compatibility-'))
      const names = MIGRATION_NAMES[storageEngine(engine)]
      const last = names[names.length - 1] ?? ''
      const before = Object.fromEntries(Object.entries(migrationsOf(engine)).filter(([name]) => name !== last))
      await withKysely(database.env, (db) => runMigrations(db, { ...before, [NEWER]: expandOnly }, []))
      const storage = await openStorage(loadConfig(database.env).database)
      t.after(() => storage.close())
      t.after(() => database.drop())
      assert.deepEqual(await storage.migrate(), { applied: [last], unknown: [NEWER] })
      assert.deepEqual((await storage.migrationState()).pending, [])
    })

    it('records a breaking migration\'s mark, which refuses the releases before it and lets it and later ones run', async (t) => {
      const database = await createTestDatabase(engine, trackedTempDir('petstore-compatibility-'))
      await migrateAsNewerRelease(engine, database.env, { [NEWER]: expandOnly, [BREAKING]: breaking('1.10.0') })
      const storage = await openStorage(loadConfig(database.env).database)
      t.after(() => storage.close())
      t.after(() => database.drop())
      assert.deepEqual((await storage.migrationState()).oldestRelease, mark('1.10.0'))
      for (const release of ['1.0.0', '1.9.9']) {
        await assert.rejects(storage.migrate(release), (error: Error) => {
          assert.ok(error instanceof IncompatibleDatabaseError, String(error))
          assert.match(error.message, /^this database needs petstore 1\.10\.0 or later, and this is 1\.9\.9|^this database needs petstore 1\.10\.0 or later, and this is 1\.0\.0/)
          assert.match(error.message, new RegExp(`${BREAKING} drops pets\\.legacy_name\\. Run petstore 1\\.10\\.0 or later`))
          return true
        })
      }
      for (const release of ['1.10.0', '2.0.0']) assert.deepEqual(await storage.migrate(release), { applied: [], unknown: [NEWER, BREAKING] })
    })
  })
}

/**
 * Every command of the CLI that works on a database, as an operator runs it; `serve` is started and stopped
 * apart. Two are not among them: `copy` refuses a source with columns it does not know, since the copy would
 * lose them, and `backup` copies the file whatever its schema (both tested below).
 */
function commands(dir: string, keyId: string): string[][] {
  return [
    ['migrate'],
    ['keys', 'create', '--name', 'during the upgrade'],
    ['keys', 'list'],
    ['keys', 'list', '--json'],
    ['keys', 'rotate', keyId],
    ['deprecations'],
    ['keys', 'revoke', keyId],
  ]
}

/** `copy` of a newer release's database into a new one, which must refuse rather than lose the newer columns. */
const copyFrom = (dir: string) => ['copy', '--from', 'DATABASE_URL', '--to', `sqlite://${path.join(dir, 'copy.db')}`]

for (const engine of DIRECT_ENGINES) {
  describe(`every command of this release on a newer release's database (${engine})`, { timeout: 180_000 }, () => {
    it('runs on an expand-only one, each with one warning naming the migration it does not know', async (t) => {
      const dir = trackedTempDir('petstore-compatibility-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      await migrateAsNewerRelease(engine, database.env, { [NEWER]: expandOnly })
      const keyId = await newKeyId(database.env)
      for (const args of commands(dir, keyId)) {
        const run = await runCli(resolved(args, database.env), database.env, dir, { timeoutMs: 60_000 })
        assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`)
        assert.deepEqual(warnings(run.stderr), [NEWER], `${args.join(' ')}: ${run.stderr}`)
      }
      const copy = await runCli(resolved(copyFrom(dir), database.env), database.env, dir, { timeoutMs: 60_000 })
      assert.equal(copy.code, 1, copy.stderr)
      assert.match(copy.stderr, /columns this version of petstore does not know \(nickname\): use the version that migrated it/)
      const status = await runCli(['migrate', '--status', '--json'], database.env, dir)
      assert.equal(status.code, 0, status.stderr)
      assert.deepEqual(JSON.parse(status.stdout), {
        release: releaseVersion(),
        applied: [...MIGRATION_NAMES[storageEngine(engine)]],
        pending: [],
        unknown: [NEWER],
        oldestRelease: null,
        allowed: true,
      })
      const server = await startServer({ ...database.env, LOG_LEVEL: 'info' }, dir)
      assert.equal((await stopServer(server)).code, 0, server.output())
      const logged = server
        .output()
        .split('\n')
        .filter((line) => line.includes('"level":40'))
      assert.equal(logged.length, 1, server.output())
      assert.match(logged[0] ?? '', new RegExp(`does not know, applied by a newer release: ${NEWER}\\.`))
      assert.match(server.output(), new RegExp(`"msg":"petstore ${releaseVersion().replaceAll('.', '\\.')} starting"`))
    })

    it('refuses a marked one in one line naming the release it needs, changing nothing', async (t) => {
      const dir = trackedTempDir('petstore-compatibility-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      await migrateAsNewerRelease(engine, database.env, { [NEWER]: expandOnly, [BREAKING]: breaking('99.0.0') })
      const refusal = `petstore: this database needs petstore 99.0.0 or later, and this is ${releaseVersion()}: migration ${BREAKING} drops pets.legacy_name. Run petstore 99.0.0 or later here, or restore a backup taken before that migration to roll back further\n`
      for (const args of [...commands(dir, 'key_unknown'), ['serve']]) {
        const run = await runCli(resolved(args, database.env), { ...database.env, PORT: '1', METRICS_PORT: 'off' }, dir, { timeoutMs: 60_000 })
        assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`)
        assert.equal(run.stderr.replace(/^(Using|Copying from) .*\n/gm, ''), refusal, args.join(' '))
      }
      if (engine === 'sqlite') {
        // A backup of a database this release may not serve is still a backup: the way back for a rollback.
        const backup = await runCli(['backup', path.join(dir, 'backup.db')], database.env, dir)
        assert.equal(backup.code, 0, backup.stderr)
      }
      const status = await runCli(['migrate', '--status'], database.env, dir)
      assert.equal(status.code, 4, status.stderr)
      assert.match(status.stdout, /Oldest release allowed: 99\.0\.0 \(0100-drop-pet-legacy-name drops pets\.legacy_name\)/)
      assert.match(status.stdout, new RegExp(`${NEWER} +unknown: applied by a newer release`))
    })
  })
}

/** `args` with DATABASE_URL, where a command line names a database, replaced by the test database's URL. */
function resolved(args: string[], env: Record<string, string>): string[] {
  return args.map((arg) => (arg === 'DATABASE_URL' ? (env.DATABASE_URL ?? '') : arg))
}

/** The migrations named by each warning of a release running on a newer release's schema. */
function warnings(stderr: string): string[] {
  return [...stderr.matchAll(/^petstore: warning: the database has migrations this release does not know, applied by a newer release: (.*)\. None/gm)].map(
    (match) => match[1] ?? '',
  )
}

/** A key made as a newer release would have made it, straight in its table, for the commands that take an id. */
async function newKeyId(env: Record<string, string>): Promise<string> {
  await withKysely(env, (db) =>
    sql`INSERT INTO api_keys (id, name, prefix, environment, created_at, secret_hash, lineage)
      VALUES ('key_newer', 'made by a newer release', 'ps_live_Newe', 'production', 1, 'x', 'key_newer')`.execute(db),
  )
  return 'key_newer'
}

/** A column as an older release's statements see it. */
interface Column {
  type: string
  nullable: boolean
  hasDefault: boolean
}

/** The features' tables and their columns; the migrations' own bookkeeping left out. */
type Schema = Map<string, Map<string, Column>>

const BOOKKEEPING = new Set(['schema_migrations', 'schema_migrations_lock', 'schema_compatibility'])

async function schemaOf(env: Record<string, string>): Promise<Schema> {
  const rows = await withKysely(env, async (db) => {
    if (loadConfig(env).database.engine === 'sqlite') {
      const tables = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`.execute(db)
      const columns = await Promise.all(
        tables.rows.map(async ({ name: table }) =>
          (
            await sql<{ name: string; type: string; notnull: number; dflt_value: unknown; pk: number }>`SELECT * FROM pragma_table_info(${table})`.execute(db)
          ).rows.map((column) => ({ table, name: column.name, type: column.type.toUpperCase(), nullable: column.notnull === 0, hasDefault: column.dflt_value !== null || column.pk > 0 })),
        ),
      )
      return columns.flat()
    }
    const columns = await sql<{ table_name: string; column_name: string; data_type: string; is_nullable: string; column_default: string | null }>`
      SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = current_schema()`.execute(db)
    return columns.rows.map((column) => ({
      table: column.table_name,
      name: column.column_name,
      type: column.data_type,
      nullable: column.is_nullable === 'YES',
      hasDefault: column.column_default !== null,
    }))
  })
  const schema: Schema = new Map()
  for (const { table, name, ...column } of rows.filter((row) => !BOOKKEEPING.has(row.table))) {
    schema.set(table, (schema.get(table) ?? new Map<string, Column>()).set(name, column))
  }
  return schema
}

/**
 * What in going from `before` to `after` would break a release that knows only `before`: a table or column
 * it reads gone (dropped or renamed), a column's type changed, one it may leave out made NOT NULL, or a NOT
 * NULL column without a default added where it inserts. A change of meaning cannot be seen here: its
 * migration must be marked by whoever writes it (docs/development.md, "Changing the schema").
 */
function breakingChanges(before: Schema, after: Schema): string[] {
  const changes: string[] = []
  for (const [table, columns] of before) {
    const now = after.get(table)
    if (now === undefined) {
      changes.push(`drops table ${table}`)
      continue
    }
    for (const [name, column] of columns) {
      const later = now.get(name)
      if (later === undefined) changes.push(`drops ${table}.${name}`)
      else if (later.type !== column.type) changes.push(`changes the type of ${table}.${name}`)
      else if (column.nullable && !later.nullable) changes.push(`makes ${table}.${name} NOT NULL`)
      else if (column.hasDefault && !later.hasDefault) changes.push(`drops the default of ${table}.${name}`)
    }
    for (const [name, column] of now) {
      if (!columns.has(name) && !column.nullable && !column.hasDefault) changes.push(`adds ${table}.${name} NOT NULL without a default`)
    }
  }
  return changes
}

for (const engine of DIRECT_ENGINES) {
  describe(`each migration, as the release before it sees the schema (${engine})`, () => {
    it('only adds, unless it is marked as breaking', async (t) => {
      const database = await createTestDatabase(engine, trackedTempDir('petstore-compatibility-'))
      t.after(() => database.drop())
      const migrations = Object.entries(migrationsOf(engine))
      let before: Schema = new Map()
      for (const [index, [name, migration]] of migrations.entries()) {
        await withKysely(database.env, (db) => runMigrations(db, Object.fromEntries(migrations.slice(0, index + 1)), []))
        const after = await schemaOf(database.env)
        if (migration.breaks === undefined) assert.deepEqual(breakingChanges(before, after), [], `${name} breaks the release before it, unmarked`)
        before = after
      }
      assert.ok(before.get('pets')?.has('category_id'), 'the schema was read')
    })

    // The check above must be able to fail: each of these, unmarked, is caught; the last only adds.
    const changes: [string, string, string[]][] = [
      ['drops a column', 'ALTER TABLE deprecated_calls DROP COLUMN first_seen', ['drops deprecated_calls.first_seen']],
      ['renames a column', 'ALTER TABLE pets RENAME COLUMN name TO title', ['drops pets.name', 'adds pets.title NOT NULL without a default']],
      ['renames a table', 'ALTER TABLE deprecated_calls RENAME TO getpet_calls', ['drops table deprecated_calls']],
      ...(engine === 'postgres'
        ? ([
            ['makes a column required', 'ALTER TABLE pets ALTER COLUMN status SET NOT NULL', ['makes pets.status NOT NULL']],
            ['adds a required column without a default', 'ALTER TABLE pets ADD COLUMN weight integer NOT NULL', ['adds pets.weight NOT NULL without a default']],
            ['changes a type', 'ALTER TABLE pets ALTER COLUMN name TYPE varchar(50)', ['changes the type of pets.name']],
          ] satisfies [string, string, string[]][])
        : []),
      ['adds a required column with a default', 'ALTER TABLE pets ADD COLUMN weight INTEGER NOT NULL DEFAULT 0', []],
    ]
    for (const [what, statement, expected] of changes) {
      it(`${expected.length === 0 ? 'lets pass' : 'catches'} a migration that ${what}`, async (t) => {
        const database = await createTestDatabase(engine, trackedTempDir('petstore-compatibility-'))
        t.after(() => database.drop())
        await withKysely(database.env, (db) => runMigrations(db, migrationsOf(engine), []))
        const before = await schemaOf(database.env)
        await withKysely(database.env, (db) => sql.raw(statement).execute(db))
        assert.deepEqual(breakingChanges(before, await schemaOf(database.env)), expected)
      })
    }
  })
}
