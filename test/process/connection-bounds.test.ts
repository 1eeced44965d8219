import assert from 'node:assert/strict'
import net from 'node:net'
import { after, describe, it } from 'node:test'
import { createKey, errorShape } from '../../scripts/petstore-process.js'
import { DIRECT_ENGINES, createTestDatabase } from '../helper.js'
import { type ServerProcess, cleanupProcesses, freePort, startServer, stopServer, trackedTempDir, until, within } from '../processes.js'

// Connections are the one thing a client can take from the process without a key. Both ports close
// slow and silent ones, each holds at most its cap, and running out of descriptors ends nothing (issue 39).

after(cleanupProcesses)

/** A connection opened by a test, and what became of it. */
interface Held {
  socket: net.Socket
  /** Connected, or failed or closed before it could be. */
  settled: Promise<void>
  closed: boolean
  answer: string
}

/** Opens a connection to `port` that sends `sent` (nothing: a silent one) and then waits. */
function hold(port: number, sent: string): Held {
  const socket = net.connect(port, '127.0.0.1')
  const held: Held = { socket, settled: Promise.resolve(), closed: false, answer: '' }
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => (held.answer += chunk))
  socket.on('error', () => {})
  held.settled = new Promise((resolve) => {
    socket.once('connect', () => {
      if (sent !== '') socket.write(sent)
      resolve()
    })
    socket.once('close', () => {
      held.closed = true
      resolve()
    })
  })
  return held
}

const HALF_REQUEST = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n'

/** `count` connections to `port`, every other one silent, the rest sending half a request. */
const flood = (port: number, count: number): Held[] => Array.from({ length: count }, (_, i) => hold(port, i % 2 === 0 ? '' : HALF_REQUEST))

/** The value of a series in a metrics text. */
function series(text: string, name: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `))
  assert.ok(line !== undefined, `no ${name} in the metrics`)
  return Number(line.slice(name.length + 1))
}

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(5_000) })
  return { status: response.status, text: await response.text() }
}

describe('the operations port has the API port’s bounds', () => {
  it('closes slow and silent connections as the API port does, with a 408 in the error shape to the slow ones', { timeout: 60_000 }, async (t) => {
    const dir = trackedTempDir('petstore-bounds-')
    const metricsPort = await freePort()
    const env = { METRICS_PORT: String(metricsPort), REQUEST_TIMEOUT_MS: '1500', HEADERS_TIMEOUT_MS: '1000', KEEP_ALIVE_TIMEOUT_MS: '1000' }
    const server = await startServer(env, dir)
    t.after(() => stopServer(server))
    for (const [name, port] of [
      ['API', server.port],
      ['operations', metricsPort],
    ] as const) {
      const started = performance.now()
      const held = flood(port, 40)
      await Promise.all(held.map((one) => one.settled))
      // The bound: the timeout, the check interval, and a busy machine's margin; Node's default check alone is 30 s.
      await until(() => held.every((one) => one.closed), 8_000, () => `${name} port: ${held.filter((one) => !one.closed).length} of 40 still open`)
      const slow = held.filter((_, i) => i % 2 === 1)
      for (const one of slow) {
        assert.match(one.answer, /^HTTP\/1\.1 408 /, `${name} port: ${one.answer}`)
        const body = one.answer.slice(one.answer.indexOf('\r\n\r\n') + 4)
        assert.equal(errorShape(408, body), undefined, `${name} port: ${body}`)
        assert.equal((JSON.parse(body) as { code: string }).code, 'request_timeout')
      }
      assert.ok(performance.now() - started < 8_000)
    }
  })
})

/** The descriptor limit the flood's server runs under. */
const DESCRIPTORS = 256

describe('a flood of connections under a low descriptor limit', () => {
  for (const engine of DIRECT_ENGINES) {
    it(
      `${engine}: twice the limit's connections on each port, silent and slow, end nothing; /readyz answers within 1 s of the end, acknowledged creates are there, the metric counts the refusals`,
      { timeout: 120_000 },
      async (t) => {
        const dir = trackedTempDir('petstore-descriptors-')
        const database = await createTestDatabase(engine, dir)
        t.after(() => database.drop())
        const metricsPort = await freePort()
        const env = { ...database.env, METRICS_PORT: String(metricsPort), REQUEST_TIMEOUT_MS: '3000', HEADERS_TIMEOUT_MS: '2000' }
        const key = await createKey(env, dir)
        const server: ServerProcess = await startServer(env, dir, [], { descriptors: DESCRIPTORS })
        t.after(() => stopServer(server))
        const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }

        const acknowledged: number[] = []
        for (let n = 0; n < 20; n++) {
          const response = await fetch(`${server.baseUrl}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name: `before ${n}`, categoryId: 1 }) })
          const text = await response.text()
          assert.equal(response.status, 201, text)
          acknowledged.push((JSON.parse(text) as { id: number }).id)
        }

        const held = [...flood(server.port, 2 * DESCRIPTORS), ...flood(metricsPort, 2 * DESCRIPTORS)]
        await within(Promise.all(held.map((one) => one.settled)), 30_000, () => 'the flood’s connections never settled')
        // Held as an attacker holds them, until the server has closed each: refused at once, or timed out.
        // Meanwhile the memory check runs several times, which is what an EMFILE ended before.
        await until(
          () => server.exit !== undefined || held.every((one) => one.closed),
          20_000,
          () => `${held.filter((one) => !one.closed).length} of the flood's connections still open`,
        )
        assert.equal(server.exit, undefined, `the server ended under the flood:\n${server.output()}`)
        const ended = performance.now()

        // Readiness on the operations port, as an orchestrator asks: within a second of the flood's end.
        let ready: { status: number; text: string } | undefined
        await until(
          async () => {
            ready = await get(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined)
            return ready?.status === 200
          },
          1_000,
          () => `/readyz did not answer 200 within 1 s of the flood's end: ${ready?.status ?? 'no answer'} ${ready?.text ?? ''}`,
        )
        assert.ok(performance.now() - ended <= 1_000)

        const listed = await get(`${server.baseUrl}/v1/pets?limit=100`, headers)
        assert.equal(listed.status, 200, listed.text)
        const ids = new Set((JSON.parse(listed.text) as { id: number }[]).map((pet) => pet.id))
        for (const id of acknowledged) assert.ok(ids.has(id), `pet ${id}, acknowledged before the flood, is missing`)

        // Each port holds at most its cap, below the limit less what is reserved: at least half the flood was
        // refused. The operations port's thread tells its refusals a few times a second.
        const refused: Record<string, number> = {}
        await until(
          async () => {
            const metrics = (await get(`http://127.0.0.1:${metricsPort}/metrics`)).text
            for (const listener of ['api', 'operations']) {
              refused[listener] =
                series(metrics, `petstore_connections_refused_total{listener="${listener}",reason="cap"}`) +
                series(metrics, `petstore_connections_refused_total{listener="${listener}",reason="descriptors"}`)
            }
            return Object.values(refused).every((count) => count >= DESCRIPTORS)
          },
          2_000,
          () => `of ${2 * DESCRIPTORS} connections on each port, refused: ${JSON.stringify(refused)}`,
        )
        assert.equal(server.exit, undefined, `the server ended:\n${server.output()}`)
      },
    )
  }
})
