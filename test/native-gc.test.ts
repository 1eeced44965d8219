import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { BIN } from './helper.js'
import { cleanupProcesses, runCommand, startServer, stopServer, trackedTempDir } from './processes.js'

// better-sqlite3 12 on Node 24.19+ aborted the process (`Assertion failed: (env) != nullptr` in
// node::RemoveEnvironmentCleanupHook) whenever a GC collected a statement nobody held any more: at
// start-up, during migrations, or later under load (docs/decisions/0011-node-runtime.md). Only a GC
// shows it, so the service runs here with a 1 MiB young generation and a full GC forced every few
// milliseconds, which collects every dropped statement almost at once. SQLite only: the PostgreSQL
// driver has no native part.

after(cleanupProcesses)

/** Node flags that make garbage collection constant: tiny young generation, `gc()` on a 3 ms timer. */
const GC_STRESS = [
  '--max-semi-space-size=1',
  '--expose-gc',
  '--import',
  'data:text/javascript,setInterval(() => globalThis.gc(), 3).unref()',
]

describe(`the service under constant garbage collection (Node ${process.versions.node})`, () => {
  it('migrates a new database, serves 600 creates and reads, and shuts down cleanly', { timeout: 90_000 }, async () => {
    const dir = trackedTempDir('petstore-native-gc-')
    const env = { DATABASE_URL: `sqlite://${dir}/petstore.db` }
    // keys create opens the new database and applies every migration, under the same stress.
    const created = await runCommand(process.execPath, [...GC_STRESS, BIN, 'keys', 'create', '--name', 'gc', '--json'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', ...env },
      timeoutMs: 30_000,
    })
    assert.deepEqual({ code: created.code, signal: created.signal }, { code: 0, signal: null }, created.stderr)
    const { key } = JSON.parse(created.stdout) as { key: string }

    const server = await startServer(env, dir, [], { nodeArgs: GC_STRESS })
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const statuses = new Map<number, number>()
    const count = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1)
    let next = 0
    const client = async () => {
      while (next < 200) {
        const i = next++
        const created = await fetch(`${server.baseUrl}/v1/pets`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: `gc ${i}`, categoryId: i + 1, status: 'available' }),
        })
        count(created.status)
        const { id } = (await created.json()) as { id: number }
        // Distinct queries, so that the read cache misses and statements are prepared and dropped.
        const list = await fetch(`${server.baseUrl}/v1/pets?limit=${(i % 100) + 1}&status=available`, { headers })
        count(list.status)
        await list.arrayBuffer()
        const one = await fetch(`${server.baseUrl}/v1/pets/${id}`, { headers })
        count(one.status)
        await one.arrayBuffer()
      }
    }
    await Promise.all(Array.from({ length: 8 }, client))
    assert.deepEqual(Object.fromEntries(statuses), { 200: 400, 201: 200 }, server.output())
    assert.equal(server.child.exitCode, null, server.output())

    const exit = await stopServer(server, 'SIGTERM', 20_000)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
  })
})
