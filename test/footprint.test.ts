import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createKey } from '../scripts/petstore-process.js'
import { sqliteDatabaseEnv } from './helper.js'
import { cleanupProcesses, freePort, recordModules, startServer, stopServer, trackedTempDir } from './processes.js'

after(cleanupProcesses)

// Memory is part of the budget (bench/README.md): what the service never uses must not be loaded.
// Kysely on an up-to-date database: migrations.test.ts; OpenTelemetry without an endpoint: tracing.test.ts.
describe('what the serving process loads', () => {
  it("loads no undici (Node's fetch and WebSocket client), which an ES import of node:http would", { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-footprint-')
    const modules = recordModules(dir)
    const env = sqliteDatabaseEnv(dir)
    const key = await createKey({ PATH: process.env.PATH ?? '', ...env }, 'footprint test')
    const server = await startServer({ ...env, METRICS_PORT: String(await freePort()) }, dir, [], { nodeArgs: modules.nodeArgs })
    for (const url of ['/v1/pets', '/v1/pets/1', '/nowhere']) {
      const response = await fetch(`${server.baseUrl}${url}`, { headers: { authorization: `Bearer ${key}` } })
      await response.arrayBuffer()
    }
    assert.equal((await stopServer(server)).code, 0, server.output())
    const builtins = modules.builtins()
    // It served, through node:http.
    assert.ok(builtins.some((name) => name.endsWith(' _http_server')), builtins.join('\n'))
    assert.deepEqual(
      builtins.filter((name) => name.includes('undici')),
      [],
    )
  })
})
