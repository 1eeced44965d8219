import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import { createKey } from '../../scripts/petstore-process.js'
import { loadConfig } from '../../src/config.js'
import { MIGRATION_NAMES } from '../../src/storage/migrations/names.js'
import { openStorage } from '../../src/repositories.js'
import { ENGINES, createTestDatabase, storageEngine } from '../helper.js'
import { cleanupProcesses, recordModules, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

/** Adds a row to `schema_migrations` as a newer version of the service would have. */
async function recordMigration(url: string, name: string): Promise<void> {
  const timestamp = new Date().toISOString()
  if (url.startsWith('sqlite://')) {
    const db = new Sqlite(url.slice('sqlite://'.length))
    db.prepare('INSERT INTO schema_migrations (name, timestamp) VALUES (?, ?)').run(name, timestamp)
    db.close()
    return
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('INSERT INTO schema_migrations (name, timestamp) VALUES ($1, $2)', [name, timestamp])
  } finally {
    await client.end()
  }
}

for (const engine of ENGINES) {
  describe(`migrations (${engine})`, () => {
    it('applies every migration of the engine in order on a new database, then finds nothing to do', async (t) => {
      const dir = trackedTempDir('petstore-migrations-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const config = loadConfig(database.env, dir).database
      const first = await openStorage(config)
      assert.deepEqual(await first.migrate(), MIGRATION_NAMES[storageEngine(engine)])
      assert.deepEqual(await first.migrate(), [])
      await first.close()
      const second = await openStorage(config)
      assert.deepEqual(await second.migrate(), [])
      await second.close()
    })

    it('applies each migration exactly once, all in one process, when six `petstore migrate` start at once on a new database, round after round', { timeout: 120_000 }, async (t) => {
      // As six instances starting together. Through PgBouncer in transaction mode a session-level
      // lock would not keep two of them from migrating at once (ADR 20).
      for (let round = 0; round < 3; round++) {
        const dir = trackedTempDir('petstore-migrations-')
        const database = await createTestDatabase(engine, dir)
        t.after(() => database.drop())
        const runs = await Promise.all(Array.from({ length: 6 }, () => runCli(['migrate'], database.env, dir, { timeoutMs: 60_000 })))
        assert.deepEqual(runs.filter((run) => run.code !== 0).map((run) => run.stderr), [], `round ${round}: every one succeeds`)
        const applied = runs.map((run) => run.stdout.trim()).filter((stdout) => stdout !== 'Database is up to date.')
        assert.deepEqual(applied, [`Applied: ${MIGRATION_NAMES[storageEngine(engine)].join(', ')}`], `round ${round}: every migration by one process`)
      }
    })

    it('refuses a database that a newer version migrated further, and leaves it as it was', async (t) => {
      const dir = trackedTempDir('petstore-migrations-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const config = loadConfig(database.env, dir).database
      const storage = await openStorage(config)
      await storage.migrate()
      await storage.close()
      await recordMigration(database.env.DATABASE_URL ?? '', '0099-from-a-newer-version')

      const again = await openStorage(config)
      t.after(() => again.close())
      await assert.rejects(again.migrate(), (error: Error) => {
        assert.equal(error.message, 'Database migration failed')
        assert.match((error.cause as Error).message, /0099-from-a-newer-version/)
        return true
      })
      // Still serving what it holds: the refusal changed nothing.
      assert.deepEqual(await again.pets.list({ limit: 1, afterId: 0n }), [])
    })

    it('serves without loading Kysely or the migrations when the database is up to date', { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-migrations-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const modules = recordModules(dir)
      const migrationCode = /\/node_modules\/kysely\/|\/dist\/storage\/migrations\/(sqlite|postgres)\/|run-migrations/

      // A new database: serving migrates it, through Kysely.
      let server = await startServer(database.env, dir, [], { nodeArgs: modules.nodeArgs })
      assert.equal((await stopServer(server)).code, 0, server.output())
      assert.ok(modules.read().some((line) => migrationCode.test(line)), 'the hook saw the migrations load')

      // Up to date: none of it loads, and the service still answers.
      const key = await createKey({ PATH: process.env.PATH ?? '', ...database.env }, 'migrations test')
      modules.reset()
      server = await startServer(database.env, dir, [], { nodeArgs: modules.nodeArgs })
      const response = await fetch(`${server.baseUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      assert.equal(response.status, 200, await response.text())
      assert.equal((await stopServer(server)).code, 0, server.output())
      const loaded = modules.read()
      assert.ok(loaded.some((line) => line.includes('/node_modules/fastify/')), 'the hook saw the server load')
      assert.deepEqual(
        loaded.filter((line) => migrationCode.test(line.split(' ')[0] ?? '')),
        [],
      )
    })
  })
}
