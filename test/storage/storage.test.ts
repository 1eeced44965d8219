import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import { ConfigError, loadConfig } from '../../src/config.js'
import { sqliteMigrations } from '../../src/storage/migrations/sqlite/index.js'
import { openStorage } from '../../src/repositories.js'
import { tempDir } from '../helper.js'

describe('SQLite storage', () => {
  it('creates ./data/petstore.db under the working folder when DATABASE_URL is unset', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const storage = await openStorage(loadConfig({}, dir).database)
    await storage.migrate()
    await storage.close()
    assert.ok(fs.statSync(path.join(dir, 'data', 'petstore.db')).isFile())
  })

  it('refuses a SQLite file in a folder that does not exist, naming DATABASE_URL, and creates nothing', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const file = path.join(dir, 'petstor', 'petstore.db')
    await assert.rejects(
      openStorage(loadConfig({ DATABASE_URL: `sqlite://${file}` }, dir).database),
      (error: unknown) =>
        error instanceof ConfigError && error.variable === 'DATABASE_URL' && error.message.includes(file) && error.message.includes('does not exist'),
    )
    assert.equal(fs.existsSync(path.dirname(file)), false)
  })

  it('creates a new SQLite file in a folder that exists', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const storage = await openStorage(loadConfig({ DATABASE_URL: `sqlite://${dir}/pets.db` }, dir).database)
    await storage.migrate()
    await storage.close()
    assert.ok(fs.statSync(path.join(dir, 'pets.db')).isFile())
  })

  it('applies migrations once and then finds nothing to do, across reopenings', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const database = { engine: 'sqlite' as const, path: path.join(dir, 'nested', 'pets.db'), createFolder: true }
    const first = await openStorage(database)
    assert.deepEqual((await first.migrate()).applied, Object.keys(sqliteMigrations))
    assert.deepEqual((await first.migrate()).applied, [])
    await first.close()
    const second = await openStorage(database)
    assert.deepEqual((await second.migrate()).applied, [])
    await second.close()
    const db = new Sqlite(database.path, { readonly: true })
    const names = db.prepare('SELECT name FROM schema_migrations ORDER BY name').pluck().all()
    db.close()
    assert.deepEqual(names, Object.keys(sqliteMigrations))
  })

  it('leaves the database file in WAL mode', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const database = { engine: 'sqlite' as const, path: path.join(dir, 'pets.db') }
    const storage = await openStorage(database)
    await storage.migrate()
    const db = new Sqlite(database.path)
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal')
    db.close()
    await storage.close()
  })
})

describe('SQLite failures', () => {
  /** The error SQLite itself raises for `sql` on a connection set up by `setup`. */
  function sqliteError(file: string, setup: (db: Sqlite.Database) => void, sql: string): unknown {
    const db = new Sqlite(file, { readonly: false })
    try {
      setup(db)
      db.exec(sql)
    } catch (error) {
      return error
    } finally {
      db.close()
    }
    throw new Error(`no error from ${sql}`)
  }

  it('counts a read-only or full database as unavailable (503), and a broken constraint as not', async (t) => {
    const dir = tempDir()
    const database = { engine: 'sqlite' as const, path: path.join(dir, 'pets.db') }
    const storage = await openStorage(database)
    // One hook, as the storage must close before its folder goes: t.after runs hooks in the order they were added.
    t.after(async () => {
      await storage.close()
      fs.rmSync(dir, { recursive: true, force: true })
    })
    await storage.migrate()
    const insert = "INSERT INTO pets (name, category_id, status, created_at) VALUES ('x', 1, NULL, 0)"
    const readOnly = sqliteError(database.path, (db) => db.pragma('query_only = ON'), insert)
    const full = sqliteError(
      database.path,
      (db) => db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`),
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
       INSERT INTO pets (name, category_id, status, created_at) SELECT hex(randomblob(2000)), 1, NULL, 0 FROM n`,
    )
    const constraint = sqliteError(database.path, () => {}, "INSERT INTO pets (name, category_id, status, created_at) VALUES ('x', 1, 'lost', 0)")
    assert.match(String((readOnly as { code?: string }).code), /^SQLITE_READONLY/)
    assert.match(String((full as { code?: string }).code), /^SQLITE_FULL/)
    assert.equal(storage.isUnavailable(readOnly), true)
    assert.equal(storage.isUnavailable(full), true)
    assert.equal(storage.isUnavailable(constraint), false)
    assert.equal(storage.isUnavailable(new Error('a bug')), false)
  })
})
