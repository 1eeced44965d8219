import assert from 'node:assert/strict'
import { once } from 'node:events'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { ConfigError, loadConfig } from '../../src/config.js'
import { createMetrics, type Metrics } from '../../src/http/metrics.js'
import { ENTRY_OVERHEAD_BYTES, READ_CACHE_BUDGET_BYTES } from '../../src/pets/pets.representation-cache.js'
import { ENGINES, ROOT, type TestApp, buildTestApp, createTestDatabase, errorBody, postPet, useTestApp } from '../helper.js'
import { startPetstore } from '../../scripts/petstore-process.js'
import { cleanupProcesses, freePort, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

type Labels = Record<string, string>

/** Every sample of a text exposition, as name, labels and value. */
function samples(text: string): { name: string; labels: Labels; value: number }[] {
  const result = []
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) continue
    const labels: Labels = {}
    for (const [, name, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[name ?? ''] = value ?? ''
    }
    result.push({ name: match[1] ?? '', labels, value: Number(match[3]) })
  }
  return result
}

/** The value of the one sample `name` with exactly `labels`, or undefined if there is none. */
function sample(text: string, name: string, labels: Labels = {}): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort())
  const found = samples(text).filter((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted)
  assert.ok(found.length <= 1, `${name} ${wanted} appears ${found.length} times`)
  return found[0]?.value
}

const exposition = (metrics: Metrics) => metrics.registry.metrics()

async function keyId(testApp: TestApp): Promise<string> {
  const keys = await createApiKeysService({ apiKeys: testApp.storage.apiKeys, clock: testApp.clock, environment: testApp.config.environment }).list()
  assert.equal(keys.length, 1)
  return keys[0]?.id ?? ''
}

const NO_LIMITS = { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '0' }

describe('metrics configuration', () => {
  it('listens on 9464 at HOST unless told otherwise', () => {
    assert.deepEqual(loadConfig({}).metrics, { port: 9464, host: '0.0.0.0', chosen: false, hostVariable: 'HOST' })
    assert.deepEqual(loadConfig({ HOST: '127.0.0.1' }).metrics, { port: 9464, host: '127.0.0.1', chosen: false, hostVariable: 'HOST' })
    assert.deepEqual(loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '10.0.0.5' }).metrics, { port: 9100, host: '10.0.0.5', chosen: true, hostVariable: 'METRICS_HOST' })
    assert.equal(loadConfig({ METRICS_PORT: '9464' }).metrics?.chosen, true)
  })

  it('turns the listener off with METRICS_PORT=off', () => {
    assert.equal(loadConfig({ METRICS_PORT: 'off' }).metrics, undefined)
  })

  for (const value of ['0', '65536', 'abc', '94 64', 'false', 'OFF', '-1']) {
    it(`refuses METRICS_PORT=${value}, naming the variable`, () => {
      assert.throws(() => loadConfig({ METRICS_PORT: value }), (error) => error instanceof ConfigError && error.variable === 'METRICS_PORT')
    })
  }

  it('refuses a METRICS_PORT equal to PORT', () => {
    assert.throws(
      () => loadConfig({ PORT: '9000', METRICS_PORT: '9000' }),
      (error) => error instanceof ConfigError && error.variable === 'METRICS_PORT' && /PORT \(9000\)/.test(error.message),
    )
  })
})

for (const engine of ENGINES) {
  describe(`metrics of requests on ${engine}`, () => {
    const metrics = createMetrics({ processMetrics: false })
    const fx = useTestApp(engine, { env: NO_LIMITS, metrics })
    let petId = ''
    let text = ''

    before(async () => {
      for (let i = 0; i < 2; i++) {
        const created = await postPet(fx.testApp, fx.key, `{"name":"Rex ${i}","categoryId":1}`)
        assert.equal(created.statusCode, 201, created.body)
        petId = /"id":(\d+)/.exec(created.body)?.[1] ?? ''
      }
      for (let i = 0; i < 3; i++) assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
      assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=abc' })).statusCode, 400)
      for (let i = 0; i < 2; i++) {
        assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${petId}` })).statusCode, 200)
      }
      assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/987654321' })).statusCode, 404)
      assert.equal((await fx.testApp.request(fx.key, { method: 'DELETE', url: '/v1/pets' })).statusCode, 405)
      assert.equal((await fx.testApp.app.inject({ method: 'GET', url: '/no/such/place?secret=1' })).statusCode, 404)
      assert.equal((await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets' })).statusCode, 401)
      assert.equal((await fx.testApp.request(`ps_live_${'x'.repeat(32)}`, { method: 'GET', url: '/v1/pets' })).statusCode, 401)
      text = await exposition(metrics)
    })

    it('counts requests by method, route template and status', () => {
      const count = (method: string, route: string, status: string) =>
        sample(text, 'petstore_http_requests_total', { method, route, status })
      assert.equal(count('POST', '/v1/pets', '201'), 2)
      assert.equal(count('GET', '/v1/pets', '200'), 3)
      assert.equal(count('GET', '/v1/pets', '400'), 1)
      assert.equal(count('GET', '/v1/pets', '401'), 2)
      assert.equal(count('GET', '/v1/pets/:petId', '200'), 2)
      assert.equal(count('GET', '/v1/pets/:petId', '404'), 1)
      assert.equal(count('DELETE', '/v1/pets', '405'), 1)
      assert.equal(count('GET', 'unmatched', '404'), 1)
    })

    it('never labels a series with a raw URL', () => {
      const routes = new Set(samples(text).flatMap((s) => (s.labels.route === undefined ? [] : [s.labels.route])))
      assert.deepEqual([...routes].sort(), ['/v1/pets', '/v1/pets/:petId', 'unmatched'])
      for (const raw of ['987654321', '/no/such/place', 'secret=1', `/v1/pets/${petId}"`]) assert.ok(!text.includes(raw), raw)
    })

    it('records each request in the duration histogram of its series', () => {
      const labels = { method: 'GET', route: '/v1/pets', status: '200' }
      assert.equal(sample(text, 'petstore_http_request_duration_seconds_count', labels), 3)
      assert.equal(sample(text, 'petstore_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }), 3)
      assert.equal(sample(text, 'petstore_http_request_duration_seconds_bucket', { ...labels, le: '0.0005' }) !== undefined, true)
      const sum = sample(text, 'petstore_http_request_duration_seconds_sum', labels) ?? 0
      assert.ok(sum > 0 && sum < 30, `sum ${sum}`)
    })

    it('counts a missing and an invalid key as auth failures, and nothing as rate limited', () => {
      assert.equal(sample(text, 'petstore_auth_failures_total', { reason: 'missing' }), 1)
      assert.equal(sample(text, 'petstore_auth_failures_total', { reason: 'invalid' }), 1)
      assert.equal(sample(text, 'petstore_rate_limited_total', { limit: 'per-key' }), 0)
      assert.equal(sample(text, 'petstore_rate_limited_total', { limit: 'failed-auth' }), 0)
    })

    it('counts getPet calls under the caller key id, never its secret', async () => {
      const id = await keyId(fx.testApp)
      assert.match(id, /^key_/)
      // Both the 200 and the 404: each is a call of the deprecated operation.
      assert.equal(sample(text, 'petstore_deprecated_calls_total', { operation: 'getPet', key_id: id }), 3)
      assert.equal(samples(text).filter((s) => s.name === 'petstore_deprecated_calls_total').length, 1)
      assert.ok(!text.includes(fx.key), 'the secret appears in the metrics')
      assert.ok(!text.includes(fx.key.slice(8, 20)), 'part of the secret appears in the metrics')
      assert.ok(!text.includes('ps_live_'))
    })

    it('exports what the read cache holds, in the bytes its budget counts, and that budget', () => {
      const bytes = sample(text, 'petstore_read_cache_bytes') ?? Number.NaN
      const entries = sample(text, 'petstore_read_cache_entries') ?? Number.NaN
      assert.equal(sample(text, 'petstore_read_cache_budget_bytes'), READ_CACHE_BUDGET_BYTES)
      // SQLite keeps the page and the pet read again; PostgreSQL never the last page, and the pet once read again within a second.
      assert.ok(engine === 'sqlite' ? entries === 2 : entries >= 0 && entries <= 1, `entries ${entries}`)
      assert.ok(bytes >= entries * ENTRY_OVERHEAD_BYTES && bytes <= READ_CACHE_BUDGET_BYTES, `bytes ${bytes}`)
    })

    if (engine !== 'sqlite') {
      it('exports the PostgreSQL pool figures, read at scrape time', async () => {
        const now = await exposition(metrics)
        assert.equal(sample(now, 'petstore_db_pool_max_connections'), 10)
        const busy = sample(now, 'petstore_db_pool_connections', { state: 'busy' })
        const idle = sample(now, 'petstore_db_pool_connections', { state: 'idle' })
        assert.equal(busy, 0)
        assert.ok(idle !== undefined && idle >= 1 && idle <= 10, `idle ${idle}`)
        assert.equal(sample(now, 'petstore_db_pool_waiting'), 0)
      })
    } else {
      it('exports no pool figures for SQLite, which has none', () => {
        assert.equal(samples(text).filter((s) => s.name.startsWith('petstore_db_pool_')).length, 0)
      })
    }

    it('leaves out process metrics when asked to', () => {
      assert.equal(sample(text, 'process_cpu_user_seconds_total'), undefined)
    })
  })

  describe(`metrics of database outages on ${engine}`, () => {
    it('counts each request answered 503 because the database is gone', async (t) => {
      const metrics = createMetrics({ processMetrics: false })
      const testApp = await buildTestApp(engine, { env: NO_LIMITS, metrics })
      t.after(() => testApp.close())
      const key = await testApp.createKey()
      assert.equal((await testApp.request(key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
      assert.equal(sample(await exposition(metrics), 'petstore_db_unavailable_total'), 0)
      await testApp.storage.close()
      // A create, which must reach the database (a read may come from the exact read cache).
      for (let i = 0; i < 2; i++) {
        const response = await testApp.request(key, {
          method: 'POST',
          url: '/v1/pets',
          headers: { 'content-type': 'application/json' },
          payload: '{"name":"Rex","categoryId":1}',
        })
        assert.equal(response.statusCode, 503)
        assert.equal(errorBody(response).code, 'unavailable')
      }
      // Readiness failing is not a request the database failed: it is not counted.
      assert.equal((await testApp.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503)
      assert.equal(sample(await exposition(metrics), 'petstore_db_unavailable_total'), 2)
    })
  })
}

describe('metrics of rate limits', () => {
  const metrics = createMetrics({ processMetrics: false })
  const fx = useTestApp('sqlite', { env: { RATE_LIMIT_PER_KEY: '2', RATE_LIMIT_FAILED_AUTH_PER_IP: '1' }, metrics })
  const wrong = `ps_live_${'y'.repeat(32)}`

  it('counts a request over the per-key limit', async () => {
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })).statusCode)
    assert.deepEqual(statuses, [200, 200, 429])
    const text = await exposition(metrics)
    assert.equal(sample(text, 'petstore_rate_limited_total', { limit: 'per-key' }), 1)
    assert.equal(sample(text, 'petstore_http_requests_total', { method: 'GET', route: '/v1/pets', status: '429' }), 1)
  })

  it('counts refusals of an address over the failed-auth limit, and only looked-up keys as invalid', async () => {
    const statuses = []
    for (let i = 0; i < 4; i++) {
      const response = await fx.testApp.request(wrong, { method: 'GET', url: '/v1/pets', remoteAddress: '198.51.100.9' })
      statuses.push(response.statusCode)
    }
    // The second try is looked up, fails and crosses the limit; the third is the address's one lookup of the
    // second (LIMITED_LOOKUP_MS) and fails; the fourth is refused before any lookup.
    assert.deepEqual(statuses, [401, 429, 429, 429])
    const text = await exposition(metrics)
    assert.equal(sample(text, 'petstore_rate_limited_total', { limit: 'failed-auth' }), 3)
    assert.equal(sample(text, 'petstore_auth_failures_total', { reason: 'invalid' }), 3)
    assert.ok(!text.includes(wrong) && !text.includes('198.51.100.9'))
  })
})

describe('petstore_build_info', () => {
  it('says which release serves, on which Node.js, as one series of 1, when the serving process tells it', async () => {
    const text = await exposition(createMetrics({ processMetrics: false, release: '9.8.7' }))
    assert.equal(sample(text, 'petstore_build_info', { version: '9.8.7', node_version: process.version }), 1)
    assert.equal(text.match(/^petstore_build_info\{/gm)?.length, 1, 'one series')
    assert.doesNotMatch(await exposition(createMetrics({ processMetrics: false })), /petstore_build_info/)
  })
})

describe('metrics of a registry with process metrics', () => {
  it('includes the standard process and Node.js metrics', async () => {
    const text = await createMetrics().registry.metrics()
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      assert.ok(sample(text, name) !== undefined, `${name} is missing`)
    }
  })
})

/** GET over a connection of its own, so that node:cluster hands each request to the next worker. */
function getOnNewConnection(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false, headers }, (response) => {
        response.resume()
        response.once('end', () => resolve(response.statusCode ?? 0))
      })
      .once('error', reject)
  })
}

async function createKeyWithCli(env: Record<string, string>, dir: string): Promise<string> {
  const run = await runCli(['keys', 'create', '--name', 'metrics'], env, dir, { rejectOnFailure: true })
  return run.stdout.trimEnd().split('\n').at(-1) ?? ''
}

describe('the metrics listener of petstore serve', () => {
  it('serves /metrics on METRICS_PORT only, 404 elsewhere there and on the API port, and still stops at once on SIGTERM', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-metrics-')
    const database = await createTestDatabase('sqlite', dir)
    const key = await createKeyWithCli(database.env, dir)
    const metricsPort = await freePort()
    const server = await startServer({ ...database.env, METRICS_PORT: String(metricsPort), SHUTDOWN_DRAIN_MS: '0' }, dir)
    const metricsUrl = `http://127.0.0.1:${metricsPort}`

    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${server.baseUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      assert.equal(response.status, 200)
      await response.arrayBuffer()
    }
    const scraped = await fetch(`${metricsUrl}/metrics`)
    assert.equal(scraped.status, 200)
    assert.equal(scraped.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
    const text = await scraped.text()
    assert.equal(sample(text, 'petstore_http_requests_total', { method: 'GET', route: '/v1/pets', status: '200' }), 2)
    assert.ok(sample(text, 'process_cpu_user_seconds_total') !== undefined, 'no process metrics')
    // One release, not one per worker: an instance counts once in "Versions serving".
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
    assert.equal(sample(text, 'petstore_build_info', { version, node_version: process.version }), 1)
    assert.equal(text.match(/^petstore_build_info\{.*\} 1$/gm)?.length, 1, text.match(/^petstore_build_info.*$/gm)?.join('\n'))
    assert.ok(!text.includes(key))

    const elsewhere = await fetch(`${metricsUrl}/v1/pets`)
    assert.equal(elsewhere.status, 404)
    assert.deepEqual(await elsewhere.json(), { code: 'not_found', message: 'No route GET /v1/pets.', status: 404 })
    const posted = await fetch(`${metricsUrl}/metrics`, { method: 'POST' })
    assert.equal(posted.status, 405)
    assert.equal(posted.headers.get('allow'), 'GET, HEAD')
    assert.equal(((await posted.json()) as { code: string }).code, 'method_not_allowed')

    const onApiPort = await fetch(`${server.baseUrl}/metrics`)
    assert.equal(onApiPort.status, 404)
    assert.equal(((await onApiPort.json()) as { code: string }).code, 'not_found')

    // The scrape's keep-alive connection is still open: it must not hold the shutdown.
    const exit = await stopServer(server, 'SIGTERM', 4_500)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
    await database.drop()
  })

  it('exits 1 naming METRICS_PORT when that port is taken', { timeout: 30_000 }, async (t) => {
    const dir = trackedTempDir('petstore-metrics-')
    const database = await createTestDatabase('sqlite', dir)
    const taken = net.createServer()
    taken.listen(0, '127.0.0.1')
    await once(taken, 'listening')
    t.after(() => taken.close())
    const { port } = taken.address() as net.AddressInfo
    // A chosen port in use is waited for as a predecessor's would be, up to the shutdown's budget: here half a second.
    const result = await runCli(
      ['serve'],
      { ...database.env, HOST: '127.0.0.1', PORT: String(await freePort()), METRICS_PORT: String(port), SHUTDOWN_DRAIN_MS: '0', SHUTDOWN_TIMEOUT_MS: '0' },
      dir,
    )
    assert.equal(result.code, 1, result.stderr)
    assert.match(result.stderr, /METRICS_PORT/)
  })

  it('serves without /metrics, saying so, when METRICS_PORT is unset and the default port is taken', { timeout: 30_000 }, async (t) => {
    const dir = trackedTempDir('petstore-metrics-')
    const database = await createTestDatabase('sqlite', dir)
    // A second instance on one host, started with only PORT changed, finds 9464 taken by the first.
    const first = net.createServer()
    first.on('error', () => {}) // already taken by something else: the case under test all the same
    first.listen(9464, '127.0.0.1')
    await Promise.race([once(first, 'listening'), once(first, 'error')])
    t.after(() => first.close())
    const server = await startPetstore({
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', ...database.env },
    })
    t.after(() => stopServer(server))
    assert.equal((await fetch(`${server.baseUrl}/healthz`)).status, 200)
    assert.match(server.output(), /the default metrics port 9464 is in use on 127\.0\.0\.1.*serving without \/metrics; set METRICS_PORT/)
  })

  it('sums the figures of every worker on the primary with --workers 2, where workers open no listener of their own', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-metrics-')
    const database = await createTestDatabase('sqlite', dir)
    const key = await createKeyWithCli(database.env, dir)
    const metricsPort = await freePort()
    const server = await startServer({ ...database.env, METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info' }, dir, ['--workers', '2'])
    // Each worker logs once it listens; both must, or the kernel would hand every connection to one.
    for (let waited = 0; (server.output().match(/Server listening/g) ?? []).length < 2; waited += 50) {
      assert.ok(waited < 10_000, `the workers did not both listen:\n${server.output()}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }

    const statuses = []
    for (let i = 0; i < 20; i++) statuses.push(await getOnNewConnection(`${server.baseUrl}/v1/pets`, { authorization: `Bearer ${key}` }))
    assert.deepEqual(new Set(statuses), new Set([200]))

    const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
    assert.equal(scraped.status, 200)
    const text = await scraped.text()
    // Round-robin gave each worker about half: only the sum over both makes 20.
    assert.equal(sample(text, 'petstore_http_requests_total', { method: 'GET', route: '/v1/pets', status: '200' }), 20)
    assert.equal(sample(text, 'petstore_http_request_duration_seconds_count', { method: 'GET', route: '/v1/pets', status: '200' }), 20)
    assert.ok(sample(text, 'process_cpu_user_seconds_total') !== undefined, 'no process metrics')

    const exit = await stopServer(server, 'SIGTERM', 20_000)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
    await database.drop()
  })
})
