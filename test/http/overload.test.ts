import assert from 'node:assert/strict'
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import type { LightMyRequestResponse } from 'fastify'
import { after, before, describe, it } from 'node:test'
import { ERROR_DESCRIPTIONS } from '../../src/errors.js'
import { OVERLOAD_RETRY_AFTER_S } from '../../src/http/load-shedding.js'
import { createMetrics, type Metrics } from '../../src/http/metrics.js'
import { procStatusKb, round } from '../../scripts/petstore-process.js'
import { DIRECT_ENGINES, type TestApp, buildTestApp, errorBody, sqliteDatabaseEnv, useTestApp } from '../helper.js'
import {
  type ServerProcess,
  cleanupProcesses,
  freePort,
  runCli,
  runCommand,
  startServer,
  stopServer,
  trackedTempDir,
} from '../processes.js'

// Overload: past a threshold of event-loop delay or heap, the service answers new requests 503
// `overloaded` at once instead of queueing them; /healthz keeps answering and /readyz fails.

after(cleanupProcesses)

const OVERLOADED = { code: 'overloaded', message: ERROR_DESCRIPTIONS.overloaded, status: 503 }
const NO_RATE_LIMITS = { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '0' }

/** Asserts a 503 `overloaded` in the exact error shape, with the headers every error carries. */
function assertOverloaded(response: LightMyRequestResponse, what: string): void {
  assert.equal(response.statusCode, 503, `${what}: ${response.body}`)
  assert.deepEqual(errorBody(response), OVERLOADED, what)
  assert.equal(response.headers['retry-after'], String(OVERLOAD_RETRY_AFTER_S), what)
  assert.equal(response.headers['cache-control'], 'no-store', what)
  assert.match(String(response.headers['x-request-id']), /^[A-Za-z0-9._:-]{1,128}$/, what)
}

/**
 * Keeps this process's event loop busy, as a flood of requests would: each turn of the loop takes
 * `turnMs` (the thread sleeps), for `ms` in all.
 */
async function lagEventLoop(ms: number, turnMs: number): Promise<void> {
  const blocker = new Int32Array(new SharedArrayBuffer(4))
  const end = performance.now() + ms
  while (performance.now() < end) {
    Atomics.wait(blocker, 0, 0, turnMs)
    await yieldToLoop()
  }
}

/** GETs `url` every 25 ms until it answers 200; fails after `limitMs`. */
async function untilServed(testApp: TestApp, key: string, url: string, limitMs: number): Promise<void> {
  const start = performance.now()
  for (;;) {
    const response = await testApp.request(key, { method: 'GET', url })
    if (response.statusCode === 200) return
    if (performance.now() - start > limitMs) assert.fail(`GET ${url} still ${response.statusCode} after ${limitMs} ms: ${response.body}`)
    await sleep(25)
  }
}

/** Sends `send()` every 25 ms while it is answered 200, and returns the first other answer; fails after `limitMs`. */
async function untilShed(send: () => Promise<LightMyRequestResponse>, limitMs: number): Promise<LightMyRequestResponse> {
  const start = performance.now()
  for (;;) {
    const response = await send()
    if (response.statusCode !== 200) return response
    if (performance.now() - start > limitMs) assert.fail(`still served after ${limitMs} ms: ${response.body}`)
    await sleep(25)
  }
}

async function overloadRejections(metrics: Metrics): Promise<Record<string, number>> {
  const metric = metrics.registry.getSingleMetric('petstore_overload_rejections_total')
  assert.ok(metric !== undefined)
  const { values } = await metric.get()
  return Object.fromEntries(values.map(({ labels, value }) => [String(labels.reason), value]))
}

for (const engine of DIRECT_ENGINES) {
  describe(`load shedding (${engine})`, () => {
    const metrics = createMetrics({ processMetrics: false })
    // Each turn of the lagging loop takes 100 ms, 2.5 times the threshold; an idle loop lags about 1 ms.
    const fx = useTestApp(engine, { env: { ...NO_RATE_LIMITS, OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '40' }, metrics })

    it('answers every request but /healthz with 503 overloaded and Retry-After while the event loop lags, and serves again at once when it no longer does', async (t) => {
      const { testApp: app, key } = fx
      assert.equal((await app.request(key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
      assert.deepEqual(await overloadRejections(metrics), { 'event-loop-delay': 0, heap: 0, 'database-pool': 0 })
      // Nothing is shed until the samples cover only time after the app was ready (load-shedding.ts): the loop
      // is lagged until readiness, which does nothing, is shed, and then left calm until the API is served.
      const readiness = await untilShed(async () => {
        await lagEventLoop(600, 100)
        return app.app.inject({ method: 'GET', url: '/readyz' })
      }, 10_000)
      assertOverloaded(readiness, 'GET /readyz while the loop lags')
      await untilServed(app, key, '/v1/pets', 1_500)
      const shedBefore = (await overloadRejections(metrics))['event-loop-delay'] ?? 0

      await lagEventLoop(1_200, 100)
      // Sent together, before the next sample can see the loop calm again.
      const [list, create, get, anonymous, spec, docs, unknown, ready, health, healthHead] = await Promise.all([
        app.request(key, { method: 'GET', url: '/v1/pets' }),
        app.request(key, { method: 'POST', url: '/v1/pets', headers: { 'content-type': 'application/json' }, payload: '{"name":"Shed","categoryId":1}' }),
        app.request(key, { method: 'GET', url: '/v1/pets/1' }),
        // Refused before authentication: an overloaded process does not look keys up.
        app.app.inject({ method: 'GET', url: '/v1/pets' }),
        app.app.inject({ method: 'GET', url: '/v1/openapi.json' }),
        app.app.inject({ method: 'GET', url: '/docs' }),
        app.app.inject({ method: 'GET', url: '/v2/nothing' }),
        app.app.inject({ method: 'GET', url: '/readyz' }),
        app.app.inject({ method: 'GET', url: '/healthz' }),
        app.app.inject({ method: 'HEAD', url: '/healthz' }),
      ])
      const lagEnded = performance.now()
      const shed = { list, create, get, anonymous, spec, docs, unknown, ready }
      for (const [what, response] of Object.entries(shed)) assertOverloaded(response, what)
      assert.equal(health.statusCode, 200, health.body)
      assert.deepEqual(JSON.parse(health.body), { status: 'ok' })
      assert.equal(healthHead.statusCode, 200)
      assert.deepEqual(await overloadRejections(metrics), { 'event-loop-delay': shedBefore + Object.keys(shed).length, heap: 0, 'database-pool': 0 })

      // The next sample, a quarter of a second on, sees the loop calm.
      await untilServed(app, key, '/v1/pets', 1_500)
      t.diagnostic(`served again ${Math.round(performance.now() - lagEnded)} ms after the lag ended`)
      for (let i = 0; i < 10; i++) {
        assert.equal((await app.request(key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
      }
      assert.equal((await app.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
      // The shed create did nothing.
      assert.equal((await app.request(key, { method: 'GET', url: '/v1/pets' })).body, '[]')
    })
  })
}

describe('load shedding while the app starts', () => {
  it('sheds nothing in the first moments after the app is ready, when starting has lagged the loop', async () => {
    // Shedding is armed three samples after the app is ready (load-shedding.ts): only a request sent before
    // then proves anything, and a machine that other work kept from sending it in time tries a new app.
    const window = 700
    const late: number[] = []
    for (let attempt = 0; attempt < 10; attempt++) {
      const testApp = await buildTestApp('sqlite', { env: { ...NO_RATE_LIMITS, OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '40' } })
      try {
        const readyAt = performance.now()
        const key = await testApp.createKey()
        await lagEventLoop(400, 100)
        const sentAfterMs = performance.now() - readyAt
        const response = await testApp.request(key, { method: 'GET', url: '/v1/pets' })
        if (sentAfterMs > window) {
          late.push(Math.round(sentAfterMs))
          continue
        }
        assert.equal(response.statusCode, 200, response.body)
        return
      } finally {
        await testApp.close()
      }
    }
    assert.fail(`no request could be sent within ${window} ms of the app being ready: after ${late.join(', ')} ms`)
  })
})

describe('load shedding on heap use', () => {
  const metrics = createMetrics({ processMetrics: false })
  const fx = useTestApp('sqlite', { env: { ...NO_RATE_LIMITS, OVERLOAD_MAX_HEAP_MB: '1' }, metrics })

  it('answers 503 overloaded while the heap in use is over OVERLOAD_MAX_HEAP_MB, and keeps /healthz', async () => {
    // Nothing is shed until the samples cover only time after the app was ready (load-shedding.ts): served till then.
    assertOverloaded(await untilShed(() => fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' }), 5_000), 'GET /v1/pets')
    assertOverloaded(await fx.testApp.app.inject({ method: 'GET', url: '/readyz' }), 'GET /readyz')
    assert.equal((await fx.testApp.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
    assert.deepEqual(await overloadRejections(metrics), { 'event-loop-delay': 0, heap: 2, 'database-pool': 0 })
  })
})

describe('load shedding turned off', () => {
  const fx = useTestApp('sqlite', { env: { ...NO_RATE_LIMITS, OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', OVERLOAD_MAX_HEAP_MB: '0' } })

  it('serves a lagging process when both thresholds are 0', async () => {
    await lagEventLoop(600, 100)
    assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
  })
})

/** What autocannon saw: latencies by answer, statuses, and the first refusals not in the expected shape. */
interface LoadTally {
  servedMs: number[]
  refusedMs: number[]
  statuses: Record<string, number>
  malformedRefusals: string[]
}

/** What the probes from outside the load saw while it lasted. */
interface Probe {
  path: string
  status: number | string
  code?: string
}

function percentile(sorted: readonly number[], share: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? Number.NaN
}

/** Checks one 503 as autocannon hands it over: raw header names, the body as text. */
function refusalProblem(body: string, headers: Record<string, string | string[]>): string | undefined {
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
  if (lower['retry-after'] !== String(OVERLOAD_RETRY_AFTER_S)) return `Retry-After ${lower['retry-after']}`
  if (lower['cache-control'] !== 'no-store') return `Cache-Control ${lower['cache-control']}`
  if (lower['x-request-id'] === undefined) return 'no X-Request-Id'
  try {
    assert.deepEqual(JSON.parse(body), OVERLOADED)
  } catch {
    return `body ${body}`
  }
  return undefined
}

/** The value of `name{labels}` in a text exposition (labels as written, in order), or 0. */
function scraped(text: string, series: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

describe('a real server driven past its capacity (SQLite)', () => {
  // @fastify/under-pressure sheds once the mean turn of the server's loop, less its 10 ms resolution, is over
  // the threshold; a turn serves what the open connections have sent meanwhile. How many connections make a
  // turn that long depends on the machine: a fast quiet one served 400 without shedding (issue 44). So the
  // connections double, stage by stage, until the service sheds and still serves some: a fast machine needs
  // more of them, a slow one sheds at the first stage, and one starved by other work may need fewer. A service
  // that never sheds fails at 6,400 connections, one that refuses everything at 25. The threshold is well
  // above what a process at rest reads on a busy machine, whose other work delays its timers too: below
  // that, the service sheds without any load and cannot be seen to recover.
  const THRESHOLD_MS = 25
  const FIRST_STAGE = 400
  const STAGE_SECONDS = 5
  const URL_PATH = '/v1/pets?limit=20'
  let server: ServerProcess | undefined
  let key = ''
  let metricsPort = 0

  before(async () => {
    const dir = trackedTempDir('petstore-overload-')
    metricsPort = await freePort()
    const env = {
      ...sqliteDatabaseEnv(dir),
      ...NO_RATE_LIMITS,
      METRICS_PORT: String(metricsPort),
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: String(THRESHOLD_MS),
    }
    const created = await runCli(['keys', 'create', '--name', 'load', '--json'], env, dir, { rejectOnFailure: true })
    key = (JSON.parse(created.stdout) as { key: string }).key
    server = await startServer(env, dir)
    // The pets the load reads. The threshold may be crossed by a process just started on a busy machine, so a
    // create refused as overloaded is sent again, as a client would: the seeding is not what is tested.
    const deadline = performance.now() + 30_000
    for (let i = 0; i < 20; i++) {
      for (;;) {
        const response = await fetch(`${server.baseUrl}/v1/pets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `Load ${i}`, categoryId: 1 + i }),
        })
        const text = await response.text()
        if (response.status === 503 && text.includes('"overloaded"') && performance.now() < deadline) {
          await sleep(200)
          continue
        }
        assert.equal(response.status, 201, text)
        break
      }
    }
  })
  after(async () => {
    if (server !== undefined) await stopServer(server)
  })

  it('listens with the backlog of LISTEN_BACKLOG (4096 by default, as far as net.core.somaxconn allows)', async (t) => {
    const { port } = server as ServerProcess
    const ss = await runCommand('ss', ['-Hltn', `sport = :${port}`], { cwd: '/', env: { PATH: process.env.PATH ?? '' } }).catch(() => undefined)
    if (ss === undefined || ss.code !== 0) return t.skip('ss (iproute2) is not installed')
    const somaxconn = Number((await runCommand('cat', ['/proc/sys/net/core/somaxconn'], { cwd: '/', env: {} })).stdout)
    // For a listening socket, ss shows the backlog as Send-Q.
    const [, , sendQ] = ss.stdout.trim().split(/\s+/)
    assert.equal(Number(sendQ), Math.min(4096, somaxconn), ss.stdout)
  })

  /** `connections` sending back to back for STAGE_SECONDS, probes beside them, then the service's recovery. */
  async function stage(connections: number) {
    const { baseUrl, child } = server as ServerProcess
    const pid = child.pid ?? 0
    const authorization = `Bearer ${key}`
    const idleRssKb = procStatusKb(pid, 'VmRSS')

    let loading = true
    let peakRssKb = idleRssKb
    const rssSampler = setInterval(() => (peakRssKb = Math.max(peakRssKb, procStatusKb(pid, 'VmRSS'))), 100)
    const probes: Probe[] = []
    const probing = (async () => {
      while (loading) {
        await Promise.all(
          ['/healthz', '/readyz'].map(async (path) => {
            try {
              const response = await fetch(`${baseUrl}${path}`, { signal: AbortSignal.timeout(10_000) })
              const body = (await response.json()) as { code?: string }
              probes.push({ path, status: response.status, ...(body.code === undefined ? {} : { code: body.code }) })
            } catch (error) {
              probes.push({ path, status: String(error) })
            }
          }),
        )
        // Often enough to catch a moment of shedding: where only a few per cent of the load is refused, the
        // service sheds for a few per cent of the time, and probes half a second apart once all missed it
        // (CI, 23 November). Two probes every 20 ms are nothing next to the load.
        await sleep(20)
      }
    })()

    const tally: LoadTally = { servedMs: [], refusedMs: [], statuses: {}, malformedRefusals: [] }
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon(
        {
          url: `${baseUrl}${URL_PATH}`,
          connections,
          duration: STAGE_SECONDS,
          timeout: 10,
          requests: [
            {
              setupRequest: (request) => ({ ...request, headers: { authorization } }),
              onResponse(status, body, _context, headers) {
                if (status !== 503) return
                const problem = refusalProblem(body, headers)
                if (problem !== undefined && tally.malformedRefusals.length < 5) tally.malformedRefusals.push(problem)
              },
            },
          ],
        },
        (error, finished) => (error === null ? resolve(finished) : reject(error)),
      )
      instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
        tally.statuses[status] = (tally.statuses[status] ?? 0) + 1
        if (status === 200) tally.servedMs.push(ms)
        else if (status === 503) tally.refusedMs.push(ms)
      })
    })
    const loadEnded = performance.now()
    loading = false
    clearInterval(rssSampler)

    // As soon as the load stops: the next sample of the loop, a quarter of a second on, is calm.
    // Then it stays calm: 20 requests in a row are served and /readyz says ready. On a CI machine
    // that runs other test files beside this one, their CPU can lag this loop past the threshold for
    // a sample after the load (CI, 23 November: one 503 right after the first 200), and shedding
    // then is right; so a relapse restarts the count, and the whole recovery must still fit in a
    // few seconds.
    let firstServedMs = Number.NaN
    let recoveredMs = Number.NaN
    const served: number[] = []
    const relapses: string[] = []
    await probing
    while (performance.now() - loadEnded < 5_000) {
      const started = performance.now()
      const response = await fetch(`${baseUrl}${URL_PATH}`, { headers: { authorization } })
      const body = await response.text()
      if (response.status === 200) {
        if (Number.isNaN(firstServedMs)) firstServedMs = performance.now() - loadEnded
        served.push(performance.now() - started)
        if (served.length < 20) continue
        const ready = await fetch(`${baseUrl}/readyz`)
        const readyBody = await ready.text()
        if (ready.status === 200) {
          recoveredMs = performance.now() - loadEnded
          break
        }
        relapses.push(`/readyz ${ready.status} ${readyBody}`)
      } else {
        assert.equal(response.status, 503, body)
        assert.equal((JSON.parse(body) as { code: string }).code, 'overloaded', body)
        if (!Number.isNaN(firstServedMs)) relapses.push(`${URL_PATH} ${response.status}`)
      }
      served.length = 0
      await sleep(25)
    }

    const servedMs = tally.servedMs.sort((a, b) => a - b)
    const refusedMs = tally.refusedMs.sort((a, b) => a - b)
    const figures = {
      connections,
      seconds: STAGE_SECONDS,
      thresholdMs: THRESHOLD_MS,
      servedPerSecond: Math.round(servedMs.length / result.duration),
      served: servedMs.length,
      refused: refusedMs.length,
      statuses: tally.statuses,
      socketErrors: result.errors,
      timeouts: result.timeouts,
      servedP50Ms: round(percentile(servedMs, 0.5)),
      servedP99Ms: round(percentile(servedMs, 0.99)),
      refusedP50Ms: round(percentile(refusedMs, 0.5)),
      refusedP99Ms: round(percentile(refusedMs, 0.99)),
      idleRssMiB: round(idleRssKb / 1024),
      peakRssMiB: round(peakRssKb / 1024),
      firstServedAfterLoadMs: round(firstServedMs),
      recoveredAfterLoadMs: round(recoveredMs),
      relapsesAfterRecovery: relapses,
      servedAfterLoadMaxMs: round(Math.max(...served)),
      probes: probes.reduce<Record<string, number>>((counts, { path, status, code }) => {
        const name = `${path} ${status}${code === undefined ? '' : ` ${code}`}`
        counts[name] = (counts[name] ?? 0) + 1
        return counts
      }, {}),
    }
    return { figures, result, tally, probes, rssGrowthKb: peakRssKb - idleRssKb }
  }

  it('serves some requests with a bounded p99 and refuses the rest at once with 503 and Retry-After; nothing else fails, memory stays bounded, /healthz answers and /readyz fails; it serves normally as soon as the load stops', async (t) => {
    const stages: Awaited<ReturnType<typeof stage>>['figures'][] = []
    let refused = 0
    let found = false
    for (let connections = FIRST_STAGE; ; ) {
      const { figures, result, tally, probes, rssGrowthKb } = await stage(connections)
      stages.push(figures)
      refused += tally.refusedMs.length
      t.diagnostic(JSON.stringify(figures))
      const all = JSON.stringify(stages)

      // At every stage, shedding or not: every request was answered, 200 or 503, and every 503 was the
      // service's own; liveness answered throughout; memory stayed bounded; the service came back at once.
      assert.equal(result.errors, 0, `socket errors and timeouts: ${all}`)
      assert.deepEqual(Object.keys(tally.statuses).filter((status) => status !== '200' && status !== '503'), [], all)
      assert.deepEqual(tally.malformedRefusals, [], all)
      // The served requests and the refusals waited their turn alike, never for long.
      assert.ok(tally.servedMs.length === 0 || figures.servedP99Ms < 5_000, all)
      assert.ok(tally.refusedMs.length === 0 || figures.refusedP99Ms < 5_000, all)
      assert.ok(probes.length > 0, all)
      for (const probe of probes.filter(({ path }) => path === '/healthz')) assert.equal(probe.status, 200, all)
      assert.ok(rssGrowthKb < 128 * 1024, all)
      assert.ok(figures.firstServedAfterLoadMs < 1_500, all)
      assert.ok(figures.recoveredAfterLoadMs < 5_000, all)

      // Shed: some requests refused, and readiness said overloaded at least once.
      const shed = tally.refusedMs.length > 0 && probes.some(({ path, status, code }) => path === '/readyz' && status === 503 && code === 'overloaded')
      if (shed && tally.servedMs.length > 0) {
        found = true
        break
      }
      // Under-pressure sheds all or nothing for a sample, so a machine starved by other work can spend a
      // whole stage refusing, when only refusals fit: the load is halved then, as it is doubled when nothing
      // was shed. A load met twice means there is none between shedding nothing and serving nothing.
      const next = shed ? connections / 2 : connections * 2
      if (next < FIRST_STAGE / 16 || next > FIRST_STAGE * 16 || stages.some((done) => done.connections === next)) break
      connections = next
    }
    assert.ok(found, `no load from ${FIRST_STAGE / 16} to ${FIRST_STAGE * 16} connections was both served in part and shed: ${JSON.stringify(stages)}`)

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    assert.ok(scraped(metrics, 'petstore_overload_rejections_total{reason="event-loop-delay"}') >= refused, metrics)
    // A refusal costs the service next to nothing: it is answered before any work is done, not after a wait in
    // a queue, which would hold most of them. A process that other work keeps from the CPU is paused now and
    // then in the middle of one, so a few may take longer.
    const shedSeries = 'petstore_http_request_duration_seconds_bucket{le="%",method="GET",route="/v1/pets",status="503"}'
    const shedTotal = scraped(metrics, shedSeries.replace('%', '+Inf'))
    const shedWithin10ms = scraped(metrics, shedSeries.replace('%', '0.01'))
    assert.ok(shedTotal > 0 && shedWithin10ms >= 0.9 * shedTotal, `${shedWithin10ms} of ${shedTotal} refusals within 10 ms: ${JSON.stringify(stages)}`)
  })
})
