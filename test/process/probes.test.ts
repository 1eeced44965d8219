import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { after, describe, it } from 'node:test'
import autocannon from 'autocannon'
import pino from 'pino'
import { loadConfig } from '../../src/config.js'
import { LIVENESS_BOUND_MS } from '../../src/process/probes.js'
import { startServer as startInProcess } from '../../src/process/server.js'
import { DIRECT_ENGINES, createTestDatabase, sqliteDatabaseEnv } from '../helper.js'
import { cleanupProcesses, freePort, runCli, runCommand, startServer, stopServer, trackedTempDir } from '../processes.js'

// Liveness and readiness on the metrics port while a burst of connections fills the API port and
// keeps the event loop that serves it busy: an orchestrator probing there gets its answer within its
// usual 1 s timeout, every time, in one process as under --workers, since the metrics port's listener
// has a thread of its own. And liveness fails only when that event loop is hung, not busy.

after(cleanupProcesses)

/** What the issue saw starve the API port's probes; fewer if this machine's open-file limit is lower. */
const WANTED_CONNECTIONS = 4_000
const LOAD_SECONDS = 8
/** An orchestrator's probe timeout (Kubernetes' default is 1 s): the requirement itself, not a measurement. */
const PROBE_TIMEOUT_MS = 1_000
const SHAPES: [string, string[]][] = [
  ['one process', []],
  ['--workers 2', ['--workers', '2']],
]

/**
 * Probes `/healthz` and `/readyz` on new connections every 100 ms from a process of its own, so
 * that the load generator's work does not delay the probes' clock; prints one JSON line per probe.
 */
const PROBER = `
import http from 'node:http'
const [port, seconds] = process.argv.slice(1).map(Number)
const end = Date.now() + seconds * 1000
const probe = (path) => new Promise((resolve) => {
  const start = performance.now()
  const request = http.get({ host: '127.0.0.1', port, path, agent: false, timeout: 5000 }, (response) => {
    let body = ''
    response.setEncoding('utf8').on('data', (chunk) => (body += chunk))
    response.on('end', () => resolve({ path, status: response.statusCode, ms: performance.now() - start, body }))
  })
  request.on('timeout', () => request.destroy(new Error('no answer within 5 s')))
  request.on('error', (error) => resolve({ path, error: error.message, ms: performance.now() - start }))
})
while (Date.now() < end) {
  for (const result of await Promise.all([probe('/healthz'), probe('/readyz')])) console.log(JSON.stringify(result))
  await new Promise((resolve) => setTimeout(resolve, 100))
}
`

interface ProbeResult {
  path: string
  status?: number
  ms: number
  body?: string
  error?: string
}

function runProber(port: number, seconds: number): Promise<ProbeResult[]> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PROBER, String(port), String(seconds)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', () =>
      resolve(
        out
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as ProbeResult),
      ),
    )
  })
}

/** Connections this process and the server may each hold, with room for everything else they open. */
async function connectionsAllowed(): Promise<number> {
  const limit = Number((await runCommand('sh', ['-c', 'ulimit -n'], { cwd: '/', env: {} })).stdout.trim())
  return Number.isFinite(limit) ? Math.min(WANTED_CONNECTIONS, limit - 500) : WANTED_CONNECTIONS
}

for (const engine of DIRECT_ENGINES) describe(`probes on the metrics port under a burst of connections (${engine})`, () => {
  for (const [shape, args] of SHAPES) {
    it(`answers /healthz 200 and /readyz in the error shape or 200 within ${PROBE_TIMEOUT_MS} ms each time, on new connections, while the API port is flooded (${shape})`, { timeout: 120_000 }, async (t) => {
      const connections = await connectionsAllowed()
      assert.ok(connections >= 1_000, `the open-file limit allows only ${connections} connections: raise ulimit -n`)
      const dir = trackedTempDir('petstore-probes-')
      const database = await createTestDatabase(engine, dir)
      t.after(database.drop)
      const metricsPort = await freePort()
      const env = { ...database.env, RATE_LIMIT_PER_KEY: '0', METRICS_PORT: String(metricsPort), OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '100' }
      const created = await runCli(['keys', 'create', '--name', 'burst', '--json'], env, dir, { rejectOnFailure: true })
      const key = (JSON.parse(created.stdout) as { key: string }).key
      const server = await startServer(env, dir, args)
      try {
        const probing = runProber(metricsPort, LOAD_SECONDS)
        const loaded = await new Promise<autocannon.Result>((resolve, reject) => {
          autocannon(
            {
              url: `${server.baseUrl}/v1/pets?limit=20`,
              connections,
              duration: LOAD_SECONDS,
              timeout: 10,
              requests: [{ setupRequest: (request) => ({ ...request, headers: { authorization: `Bearer ${key}` } }) }],
            },
            (error, result) => (error === null ? resolve(result) : reject(error)),
          )
        })
        const probes = await probing
        const slowest = Math.max(...probes.map((probe) => probe.ms))
        t.diagnostic(
          `${connections} connections: ${loaded.requests.total} requests answered (${loaded.non2xx} not 2xx, ${loaded.errors} errors, ` +
            `${loaded.timeouts} timeouts); ${probes.length} probes, the slowest ${Math.round(slowest)} ms`,
        )
        assert.ok(probes.length >= LOAD_SECONDS * 2, `only ${probes.length} probes were made`)
        const late = probes.filter((probe) => probe.error !== undefined || probe.ms > PROBE_TIMEOUT_MS)
        assert.deepEqual(late, [], `probes went unanswered within ${PROBE_TIMEOUT_MS} ms`)
        for (const probe of probes) {
          if (probe.path === '/healthz') {
            assert.equal(probe.status, 200, probe.body)
            assert.deepEqual(JSON.parse(probe.body ?? ''), { status: 'ok' })
          } else if (probe.status === 200) {
            assert.equal((JSON.parse(probe.body ?? '') as { status: string }).status, 'ok')
          } else {
            // Shedding takes an overloaded instance out of rotation, which is what readiness is for.
            const body = JSON.parse(probe.body ?? '') as { code: string; status: number }
            assert.equal(probe.status, 503, probe.body)
            assert.deepEqual(Object.keys(body), ['code', 'message', 'status'])
            assert.equal(body.code, 'overloaded', probe.body)
          }
        }
      } finally {
        assert.deepEqual(await stopServer(server, 'SIGTERM', 20_000), { code: 0, signal: null }, server.output())
      }
    })
  }
})

describe('liveness on the metrics port', () => {
  it(`answers 200 while the event loop turns, 503 unavailable once it has not turned for ${LIVENESS_BOUND_MS / 1000} s, and 200 again once it turns`, { timeout: 120_000 }, async () => {
    const dir = trackedTempDir('petstore-liveness-')
    const metricsPort = await freePort()
    const config = loadConfig({ ...sqliteDatabaseEnv(dir), PORT: String(await freePort()), METRICS_PORT: String(metricsPort) })
    // In this process, whose event loop the test can stop: the server's is this one.
    const server = await startInProcess(config, pino({ level: 'silent' }))
    try {
      const blockMs = LIVENESS_BOUND_MS + 3_000
      const probing = runProber(metricsPort, (blockMs + 4_000) / 1000)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      // Hung, as a loop stuck in synchronous work would be: no timer, no I/O, nothing runs here.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, blockMs)
      const probes = await probing
      const liveness = probes.filter((probe) => probe.path === '/healthz')
      for (const probe of liveness) {
        assert.equal(probe.error, undefined, JSON.stringify(probe))
        if (probe.status !== 200) {
          assert.equal(probe.status, 503, JSON.stringify(probe))
          const body = JSON.parse(probe.body ?? '') as { code: string; status: number }
          assert.deepEqual(Object.keys(body), ['code', 'message', 'status'])
          assert.equal(body.code, 'unavailable', probe.body)
        }
      }
      // Live, then hung, then live again: each phase once, in that order.
      const phases = liveness.map((probe) => probe.status).filter((status, i, all) => i === 0 || status !== all[i - 1])
      assert.deepEqual(phases, [200, 503, 200], JSON.stringify(liveness.map((probe) => probe.status)))
      // A loop that cannot answer whether it is ready is not: the listener says so itself, in time.
      const stalled = probes.filter((probe) => probe.path === '/readyz' && probe.status === 503)
      assert.ok(
        stalled.some((probe) => (JSON.parse(probe.body ?? '') as { code: string }).code === 'overloaded'),
        JSON.stringify(probes.filter((probe) => probe.path === '/readyz')),
      )
    } finally {
      await server.close()
    }
  })
})
