import assert from 'node:assert/strict'
import { once } from 'node:events'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, describe, it } from 'node:test'
import { createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { systemClock } from '../../src/shared/clock.js'
import { loadConfig } from '../../src/config.js'
import { openStorage } from '../../src/repositories.js'
import { DIRECT_ENGINES, type Engine, createTestDatabase } from '../helper.js'
import { type ServerProcess, cleanupProcesses, startServer, stopServer, trackedTempDir, until, within } from '../processes.js'

// Real server processes on a real database: what survives a restart, a crash and a shutdown.

after(cleanupProcesses)

const drops: (() => Promise<void>)[] = []
after(async () => {
  for (const drop of drops) await drop()
})

/** A fresh working directory and the environment naming a new database of `engine`. */
async function freshDatabase(engine: Engine): Promise<{ dir: string; env: Record<string, string> }> {
  const dir = trackedTempDir('petstore-durability-')
  const database = await createTestDatabase(engine, dir)
  drops.push(database.drop)
  return { dir, env: database.env }
}

/** Creates an API key in the database of `env` through the same service the CLI uses. */
async function createKey(env: Record<string, string>): Promise<string> {
  const config = loadConfig(env)
  const storage = await openStorage(config.database)
  try {
    await storage.migrate()
    const keys = createApiKeysService({ apiKeys: storage.apiKeys, clock: systemClock, environment: config.environment })
    return (await keys.create({ name: 'durability test' })).secret
  } finally {
    await storage.close()
  }
}

function authorized(key: string, headers: Record<string, string> = {}): Record<string, string> {
  return { authorization: `Bearer ${key}`, ...headers }
}

async function createPet(server: ServerProcess, key: string, body: string): Promise<Response> {
  return fetch(`${server.baseUrl}/v1/pets`, {
    method: 'POST',
    headers: authorized(key, { 'content-type': 'application/json' }),
    body,
    signal: AbortSignal.timeout(5_000),
  })
}

async function getText(server: ServerProcess, key: string, url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${server.baseUrl}${url}`, { headers: authorized(key), signal: AbortSignal.timeout(5_000) })
  return { status: response.status, body: await response.text() }
}

/** The id of a pet body; ids of these tests stay far below 2^53, so JSON.parse keeps them exact. */
function petId(body: string): number {
  return (JSON.parse(body) as { id: number }).id
}

for (const engine of DIRECT_ENGINES) {
  describe(`durability of a real server on ${engine}`, () => {
    it('serves every pet identically after a SIGTERM, a clean exit and a restart on the same file', { timeout: 20_000 }, async () => {
      const { dir, env } = await freshDatabase(engine)
      const key = await createKey(env)
      const first = await startServer(env, dir)
      const created: string[] = []
      for (const body of [
        '{"name":"Rex","categoryId":3,"status":"available"}',
        '{"name":"  Ünïcödé 🐕 名前  ","categoryId":9007199254740993,"status":"sold"}',
        '{"name":"No status","categoryId":1}',
        '{"name":"Max int64 category","categoryId":9223372036854775807,"status":"pending"}',
      ]) {
        const response = await createPet(first, key, body)
        assert.equal(response.status, 201)
        created.push(await response.text())
      }
      const listBefore = await getText(first, key, '/v1/pets?limit=100')
      assert.equal(listBefore.status, 200)
      assert.equal(listBefore.body, `[${created.join(',')}]`)

      assert.deepEqual(await stopServer(first), { code: 0, signal: null }, first.output())

      const second = await startServer(env, dir)
      let stopped: Awaited<ReturnType<typeof stopServer>> | undefined
      try {
        for (const body of created) {
          const fetched = await getText(second, key, `/v1/pets/${petId(body)}`)
          assert.equal(fetched.status, 200)
          assert.equal(fetched.body, body)
        }
        assert.deepEqual(await getText(second, key, '/v1/pets?limit=100'), listBefore)
      } finally {
        stopped = await stopServer(second)
      }
      assert.deepEqual(stopped, { code: 0, signal: null }, second.output())
    })

    it('keeps every acknowledged pet, unaltered and once, when killed with SIGKILL amid concurrent creates', { timeout: 20_000 }, async () => {
      const { dir, env } = await freshDatabase(engine)
      const key = await createKey(env)
      const server = await startServer(env, dir)
      const total = 300
      const inFlight = 30
      const killAfter = 150
      const statuses = ['available', 'pending', 'sold', undefined] as const
      // Each request is told apart by its name, so that a stored pet can be traced to the request that made it.
      const bodyOf = (i: number) => {
        const status = statuses[i % statuses.length]
        return JSON.stringify({ name: `crash pet #${i}`, categoryId: 1000 + i, ...(status ? { status } : {}) })
      }

      const acknowledged = new Map<number, string>()
      const errored = new Set<number>()
      const otherAnswers: string[] = []
      let answered = 0
      let sentDuringKill = 0
      let next = 0
      const sendAll = async () => {
        while (next < total) {
          const i = next++
          try {
            const response = await createPet(server, key, bodyOf(i))
            const text = await response.text()
            if (response.status === 201) acknowledged.set(i, text)
            else otherAnswers.push(`#${i}: ${response.status} ${text}`)
          } catch {
            errored.add(i)
          }
          if (++answered === killAfter) {
            server.child.kill('SIGKILL')
            sentDuringKill = next - answered
          }
        }
      }
      await Promise.all(Array.from({ length: inFlight }, sendAll))
      assert.deepEqual(await server.exited, { code: null, signal: 'SIGKILL' })

      assert.deepEqual(otherAnswers, [])
      assert.equal(acknowledged.size + errored.size, total)
      assert.ok(acknowledged.size >= killAfter, `only ${acknowledged.size} creates were acknowledged`)
      assert.ok(errored.size > 0, 'the kill came too late: no request was cut off')
      assert.ok(sentDuringKill > 0, 'no request was in flight when the server was killed')

      const restarted = await startServer(env, dir)
      let stopped: Awaited<ReturnType<typeof stopServer>> | undefined
      try {
        // listPets has no cursor, so every stored pet is found by id: ids start at 1 and each insert takes the next.
        const stored = new Map<number, string>()
        let probe = 0
        const readAll = async () => {
          while (probe < total + 20) {
            const id = ++probe
            const fetched = await getText(restarted, key, `/v1/pets/${id}`)
            if (fetched.status === 200) stored.set(id, fetched.body)
            else assert.equal(fetched.status, 404, fetched.body)
          }
        }
        await Promise.all(Array.from({ length: inFlight }, readAll))

        for (const [i, body] of acknowledged) {
          assert.equal(stored.get(petId(body)), body, `acknowledged create #${i} was lost or altered`)
        }
        const requestOf = new Map<string, number>()
        for (const [id, body] of stored) {
          const pet = JSON.parse(body) as { id: number; name: string }
          const i = Number(/^crash pet #(\d+)$/.exec(pet.name)?.[1])
          assert.ok(Number.isInteger(i) && i < total, `pet ${id} was never sent: ${body}`)
          assert.equal(requestOf.get(pet.name), undefined, `request #${i} was stored twice`)
          requestOf.set(pet.name, id)
          const sent = JSON.parse(bodyOf(i)) as Record<string, unknown>
          assert.equal(body, JSON.stringify({ id, ...sent }), `pet ${id} differs from what request #${i} sent`)
        }
        assert.ok(stored.size >= acknowledged.size && stored.size <= total)
      } finally {
        stopped = await stopServer(restarted)
      }
      assert.deepEqual(stopped, { code: 0, signal: null }, restarted.output())
    })

    /**
     * Sends the headers and half the body of a createPet, SIGTERMs the server, then sends the rest:
     * a slow client whose request is in flight for the whole shutdown.
     */
    async function createPetAcrossSigterm(connection: 'close' | 'keep-alive') {
      const { dir, env } = await freshDatabase(engine)
      const key = await createKey(env)
      const shutdownTimeoutMs = 3_000
      const server = await startServer({ ...env, SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs) }, dir)
      const body = '{"name":"Slow Poke","categoryId":7,"status":"pending"}'
      const half = Math.floor(body.length / 2)

      const socket = net.connect(server.port, '127.0.0.1')
      try {
        await within(once(socket, 'connect'), 2_000, () => 'no TCP connection')
        let received = ''
        socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk))
        const closed = once(socket, 'close')
        socket.write(
          'POST /v1/pets HTTP/1.1\r\n' +
            `Host: 127.0.0.1:${server.port}\r\n` +
            `Authorization: Bearer ${key}\r\n` +
            'Content-Type: application/json\r\n' +
            `Content-Length: ${Buffer.byteLength(body)}\r\n` +
            `Connection: ${connection}\r\n` +
            // Answered with 100 Continue once the service reads the body: its sign that the request is in flight.
            'Expect: 100-continue\r\n' +
            '\r\n' +
            body.slice(0, half),
        )
        const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'
        await until(() => received !== '', 10_000, () => 'the server never started reading the body')
        assert.equal(received, CONTINUE, 'the server answered before the body was complete')
        server.child.kill('SIGTERM')
        // Draining (SHUTDOWN_DRAIN_MS, 1 s by default): still accepting, but readiness fails so that
        // a load balancer stops sending, and every connection closes after its response.
        let ready = await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(1_000) })
        for (const deadline = performance.now() + 10_000; ready.status === 200 && performance.now() < deadline; ) {
          await ready.body?.cancel()
          await sleep(20)
          ready = await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(1_000) })
        }
        assert.equal(server.child.exitCode, null, `the server exited with a request in flight:\n${server.output()}`)
        assert.equal(received, CONTINUE, 'the server answered before the body was complete')
        assert.equal(ready.status, 503)
        assert.equal(((await ready.json()) as { code: string }).code, 'unavailable')
        assert.equal(ready.headers.get('connection'), 'close')
        // Past the drain, new connections are refused, while the request in flight still waits for its body.
        const refused = () =>
          fetch(`${server.baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
            () => false,
            () => true,
          )
        await until(refused, 10_000, () => `a server past its drain still accepts new connections:\n${server.output()}`)
        assert.equal(server.child.exitCode, null, `the server exited with a request in flight:\n${server.output()}`)

        const sentRestAt = Date.now()
        socket.write(body.slice(half))
        // The server must end the connection itself once the response is out; it exits only then.
        await within(closed, shutdownTimeoutMs + 5_000, () => `the connection was not closed; got: ${received}`)
        const [head = '', responseBody = ''] = received.slice(CONTINUE.length).split('\r\n\r\n')
        const exit = await within(server.exited, 5_000, () => `server did not exit:\n${server.output()}`)
        return { head, responseBody, body, exit, exitedAfterMs: Date.now() - sentRestAt, shutdownTimeoutMs, server }
      } finally {
        socket.destroy()
      }
    }

    for (const connection of ['close', 'keep-alive'] as const) {
      const name = `finishes a request in flight at SIGTERM (Connection: ${connection}) with a full 201, then exits 0 promptly`
      it(name, { timeout: 20_000 }, async () => {
        const { head, responseBody, body, exit, exitedAfterMs, shutdownTimeoutMs, server } =
          await createPetAcrossSigterm(connection)
        assert.match(head, /^HTTP\/1\.1 201 /, head)
        assert.match(head, new RegExp(`\r\ncontent-length: ${Buffer.byteLength(responseBody)}(\r\n|$)`, 'i'))
        const pet = JSON.parse(responseBody) as { id: number }
        assert.equal(responseBody, JSON.stringify({ id: pet.id, ...(JSON.parse(body) as object) }))
        assert.deepEqual(exit, { code: 0, signal: null }, `${server.output()}\nresponse head:\n${head}`)
        assert.ok(exitedAfterMs < shutdownTimeoutMs, `exit took ${exitedAfterMs} ms, the whole shutdown timeout`)
      })
    }
  })
}
