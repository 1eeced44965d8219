import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { errorShape } from '../../scripts/petstore-process.js'
import { createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { systemClock } from '../../src/shared/clock.js'
import { loadConfig } from '../../src/config.js'
import { openStorage } from '../../src/repositories.js'
import { type ServerProcess, cleanupProcesses, startServer, stopServer, trackedTempDir } from '../processes.js'
import { FAULTS, petNames } from './sqlite-file-faults.js'

// The SQLite file taken from under a running service, as an operator's `rm` or `mv` would: the
// service must stop acknowledging before an acknowledged pet can be lost, and say why.

after(cleanupProcesses)

async function createKey(env: Record<string, string>, dir: string): Promise<string> {
  const config = loadConfig(env, dir)
  const storage = await openStorage(config.database)
  try {
    await storage.migrate()
    const keys = createApiKeysService({ apiKeys: storage.apiKeys, clock: systemClock, environment: config.environment })
    return (await keys.create({ name: 'sqlite file test' })).secret
  } finally {
    await storage.close()
  }
}

async function send(server: ServerProcess, key: string, method: 'GET' | 'POST', url: string, body?: string) {
  const response = await fetch(`${server.baseUrl}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body,
    signal: AbortSignal.timeout(5_000),
  })
  return { status: response.status, retryAfter: response.headers.get('retry-after'), text: await response.text() }
}

/** Asserts a 503 `unavailable` in the one error shape, with Retry-After; returns its message. */
function assertUnavailable(answer: { status: number; retryAfter: string | null; text: string }): string {
  assert.equal(answer.status, 503, answer.text)
  assert.equal(errorShape(503, answer.text), undefined)
  const body = JSON.parse(answer.text) as { code: string; message: string }
  assert.equal(body.code, 'unavailable')
  assert.ok(answer.retryAfter !== null, 'no Retry-After')
  return body.message
}

describe('a SQLite file taken from under a running service', () => {
  for (const fault of FAULTS) {
    it(`${fault.name}: refuses writes, readiness and reads with 503, and loses no acknowledged pet`, { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-sqlite-file-')
      const file = path.join(dir, 'petstore.db')
      if (fault.link === true) fs.symlinkSync(path.join(dir, 'a.db'), file)
      const env = { DATABASE_URL: `sqlite://${file}` }
      const key = await createKey(env, dir)
      const server = await startServer(env, dir)
      const rex = await send(server, key, 'POST', '/v1/pets', '{"name":"Rex","categoryId":1}')
      assert.equal(rex.status, 201, rex.text)
      const rexId = (JSON.parse(rex.text) as { id: number }).id

      await fault.apply(dir, file)
      // The pets answered 201 from here on: each must be in the database at the path after a restart.
      const acknowledged: string[] = []
      await t.test('create', async () => {
        for (const name of ['Lost 1', 'Lost 2']) {
          const answer = await send(server, key, 'POST', '/v1/pets', JSON.stringify({ name, categoryId: 1 }))
          if (answer.status === 201) acknowledged.push(name)
          assertUnavailable(answer)
        }
      })
      await t.test('readiness', async () => {
        const response = await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) })
        const answer = { status: response.status, retryAfter: response.headers.get('retry-after'), text: await response.text() }
        assert.match(assertUnavailable(answer), /no longer at its path/)
      })
      await t.test('read', async () => {
        assertUnavailable(await send(server, key, 'GET', `/v1/pets/${rexId}`))
        assertUnavailable(await send(server, key, 'GET', '/v1/pets'))
      })
      await t.test('one error line naming DATABASE_URL and the path', () => {
        const lines = server.output().split('\n').filter((line) => line.includes('no longer the database file'))
        assert.equal(lines.length, 1, server.output())
        assert.ok(lines[0]?.includes('"level":50') && lines[0].includes('DATABASE_URL') && lines[0].includes(file), lines[0])
      })

      // A crash, not a clean stop: what the service did once it noticed must already have made the files safe.
      server.child.kill('SIGKILL')
      await server.exited
      await fault.afterClose(dir, file)
      const restarted = await startServer(env, dir)
      const ready = await fetch(`${restarted.baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) })
      assert.equal(ready.status, 200, await ready.text())
      await stopServer(restarted)
      const names = await petNames(file)
      for (const name of acknowledged) assert.ok(names.includes(name), `${name} was answered 201 and is gone`)
    })
  }
})
