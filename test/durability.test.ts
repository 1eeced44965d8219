import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, describe, it } from 'node:test'
import { createApiKeysService } from '../src/api-keys/api-keys.service.js'
import { systemClock } from '../src/clock.js'
import { loadConfig } from '../src/config.js'
import { openStorage } from '../src/storage/storage.js'
import { BIN, databaseEnv, tempDir } from './helper.js'

// Real server processes on a real SQLite file: what survives a restart, a crash and a shutdown.

interface ServerProcess {
  child: ChildProcess
  port: number
  baseUrl: string
  /** Resolves once the process has exited, however it ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Everything the process wrote, for failure messages. */
  output(): string
}

const running = new Set<ChildProcess>()
const dirs: string[] = []

after(() => {
  // Nothing may outlive the file, even when a test failed half-way.
  for (const child of running) child.kill('SIGKILL')
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory and the environment naming a new database file inside it. */
function freshDatabase(): { dir: string; env: Record<string, string> } {
  const dir = tempDir('petstore-durability-')
  dirs.push(dir)
  return { dir, env: databaseEnv('sqlite', dir) }
}

/** A port nobody listens on right now: the kernel picks it, we release it for the server. */
async function freePort(): Promise<number> {
  const probe = net.createServer()
  probe.listen(0, '127.0.0.1')
  await once(probe, 'listening')
  const { port } = probe.address() as net.AddressInfo
  probe.close()
  await once(probe, 'close')
  return port
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

/** Polls GET /healthz until it answers 200; fails early if the process dies, and after `timeoutMs`. */
async function waitUntilHealthy(server: ServerProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`server exited before answering /healthz:\n${server.output()}`)
    }
    try {
      const response = await fetch(`${server.baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) })
      if (response.status === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(50)
  }
  throw new Error(`server did not answer /healthz within ${timeoutMs} ms:\n${server.output()}`)
}

/** Runs `petstore serve` on a free port of 127.0.0.1 and resolves once it is healthy. */
async function startServer(env: Record<string, string>, dir: string): Promise<ServerProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, 'serve'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT_MS: '5000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  running.add(child)
  let output = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      running.delete(child)
      resolve({ code, signal })
    })
  })
  const server: ServerProcess = { child, port, baseUrl: `http://127.0.0.1:${port}`, exited, output: () => output }
  try {
    await waitUntilHealthy(server)
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  return server
}

/** Sends `signal` and waits (bounded) for the process to end; SIGKILLs it if it will not. */
async function stopServer(
  server: ServerProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 8_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  server.child.kill(signal)
  const outcome = await Promise.race([server.exited, sleep(timeoutMs).then(() => undefined)])
  if (outcome === undefined) {
    server.child.kill('SIGKILL')
    throw new Error(`server did not exit within ${timeoutMs} ms of ${signal}:\n${server.output()}`)
  }
  return outcome
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

describe('durability of a real server on a SQLite file', () => {
  it('serves every pet identically after a SIGTERM, a clean exit and a restart on the same file', { timeout: 20_000 }, async () => {
    const { dir, env } = freshDatabase()
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
    try {
      for (const body of created) {
        const fetched = await getText(second, key, `/v1/pets/${petId(body)}`)
        assert.equal(fetched.status, 200)
        assert.equal(fetched.body, body)
      }
      assert.deepEqual(await getText(second, key, '/v1/pets?limit=100'), listBefore)
    } finally {
      assert.deepEqual(await stopServer(second), { code: 0, signal: null }, second.output())
    }
  })

  it('keeps every acknowledged pet, unaltered and once, when killed with SIGKILL amid concurrent creates', { timeout: 20_000 }, async () => {
    const { dir, env } = freshDatabase()
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
        assert.ok(acknowledged.has(i) || errored.has(i))
      }
      assert.ok(stored.size >= acknowledged.size && stored.size <= total)
    } finally {
      assert.deepEqual(await stopServer(restarted), { code: 0, signal: null }, restarted.output())
    }
  })

  it('lets a request in flight at SIGTERM finish with its full response, then exits 0', { timeout: 20_000 }, async () => {
    const { dir, env } = freshDatabase()
    const key = await createKey(env)
    const server = await startServer(env, dir)
    const body = '{"name":"Slow Poke","categoryId":7,"status":"pending"}'
    const half = Math.floor(body.length / 2)

    const socket = net.connect(server.port, '127.0.0.1')
    try {
      await once(socket, 'connect')
      let received = ''
      socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk))
      const closed = once(socket, 'close')
      socket.write(
        'POST /v1/pets HTTP/1.1\r\n' +
          `Host: 127.0.0.1:${server.port}\r\n` +
          `Authorization: Bearer ${key}\r\n` +
          'Content-Type: application/json\r\n' +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          '\r\n' +
          body.slice(0, half),
      )
      // Time for the server to read the headers and start waiting for the rest of the body.
      await sleep(300)
      server.child.kill('SIGTERM')
      await sleep(300)
      assert.equal(server.child.exitCode, null, `the server exited with a request in flight:\n${server.output()}`)
      assert.equal(received, '', 'the server answered before the body was complete')
      await assert.rejects(
        fetch(`${server.baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) }),
        'a closing server still accepts new connections',
      )

      socket.write(body.slice(half))
      await Promise.race([
        closed,
        sleep(8_000).then(() => {
          throw new Error(`no complete response within 8 s; got: ${received}`)
        }),
      ])
      const [head = '', responseBody = ''] = received.split('\r\n\r\n')
      assert.match(head, /^HTTP\/1\.1 201 /, received)
      const pet = JSON.parse(responseBody) as { id: number }
      assert.equal(responseBody, JSON.stringify({ id: pet.id, ...(JSON.parse(body) as object) }))
      assert.match(head, new RegExp(`\r\ncontent-length: ${Buffer.byteLength(responseBody)}\r\n`, 'i'))
    } finally {
      socket.destroy()
    }
    const outcome = await Promise.race([server.exited, sleep(8_000).then(() => undefined)])
    assert.deepEqual(outcome, { code: 0, signal: null }, server.output())
  })
})
