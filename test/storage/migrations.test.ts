import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createKey } from '../../scripts/petstore-process.js'
import { loadConfig } from '../../src/config.js'
import { MIGRATION_NAMES } from '../../src/storage/migrations/names.js'
import { openStorage } from '../../src/repositories.js'
import { ENGINES, createTestDatabase, storageEngine } from '../helper.js'
import { cleanupProcesses, recordModules, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

for (const engine of ENGINES) {
  describe(`migrations (${engine})`, () => {
    it('applies every migration of the engine in order on a new database, then finds nothing to do', async (t) => {
      const dir = trackedTempDir('petstore-migrations-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const config = loadConfig(database.env, dir).database
      const first = await openStorage(config)
      assert.deepEqual((await first.migrate()).applied, MIGRATION_NAMES[storageEngine(engine)])
      assert.deepEqual((await first.migrate()).applied, [])
      await first.close()
      const second = await openStorage(config)
      assert.deepEqual((await second.migrate()).applied, [])
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
