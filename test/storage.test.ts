import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import { loadConfig } from '../src/config.js'
import { openStorage } from '../src/storage/storage.js'
import { tempDir } from './helper.js'

describe('SQLite storage', () => {
  it('creates ./data/petstore.db under the working folder when DATABASE_URL is unset', async () => {
    const dir = tempDir()
    try {
      const storage = await openStorage(loadConfig({}, dir).database)
      await storage.migrate()
      await storage.close()
      assert.ok(fs.statSync(path.join(dir, 'data', 'petstore.db')).isFile())
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('applies migrations once and then finds nothing to do, across reopenings', async () => {
    const dir = tempDir()
    const database = { engine: 'sqlite' as const, path: path.join(dir, 'nested', 'pets.db') }
    try {
      const first = await openStorage(database)
      assert.deepEqual(await first.migrate(), ['0001-initial'])
      assert.deepEqual(await first.migrate(), [])
      await first.close()
      const second = await openStorage(database)
      assert.deepEqual(await second.migrate(), [])
      await second.close()
      const db = new Sqlite(database.path, { readonly: true })
      const names = db.prepare('SELECT name FROM schema_migrations ORDER BY name').pluck().all()
      db.close()
      assert.deepEqual(names, ['0001-initial'])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('leaves the database file in WAL mode', async () => {
    const dir = tempDir()
    const database = { engine: 'sqlite' as const, path: path.join(dir, 'pets.db') }
    try {
      const storage = await openStorage(database)
      await storage.migrate()
      const db = new Sqlite(database.path)
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal')
      db.close()
      await storage.close()
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
