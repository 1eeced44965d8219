import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { createDeprecatedCallsCounter } from '../../src/deprecations/deprecations.metrics.js'
import { createMetrics } from '../../src/http/metrics.js'
import type { ReplicaStats } from '../../src/storage/postgres/replica-set.js'

/*
 * The service counts requests and deprecated calls in plain numbers and tells prom-client at scrape
 * time (src/http/metrics.ts). What a scrape shows must be, byte for byte, what prom-client shows when
 * every request is recorded the straightforward way, with `inc` and `observe` on the series of
 * `labels()`: the reference below, whose names, help texts, label names and buckets are the ones the
 * observing guide and ADR 0008 promise.
 */

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5]

/** The service's registry (with processMetrics: false), recorded into with prom-client's own calls. */
function reference() {
  const registry = new Registry()
  const labelNames = ['method', 'route', 'status'] as const
  const requests = new Counter({ name: 'petstore_http_requests_total', help: 'HTTP requests answered, by method, route template and status.', labelNames, registers: [registry] })
  const duration = new Histogram({
    name: 'petstore_http_request_duration_seconds',
    help: 'Time from the first byte of the request to the end of the response, by method, route template and status.',
    labelNames,
    buckets: BUCKETS,
    registers: [registry],
  })
  new Counter({
    name: 'petstore_db_unavailable_total',
    help: 'Requests answered 503 because the database could not serve them (busy, full, read-only, unreachable).',
    registers: [registry],
  })
  const overload = new Counter({
    name: 'petstore_overload_rejections_total',
    help: 'Requests answered 503 overloaded, by the measurement over its threshold (event-loop-delay, heap) or database-pool: a wait for a connection ran out.',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  overload.labels('event-loop-delay').inc(0)
  overload.labels('heap').inc(0)
  overload.labels('database-pool').inc(0)
  const deprecated = new Counter({
    name: 'petstore_deprecated_calls_total',
    help: 'Authenticated calls of deprecated operations, by operation and the public id of the calling key.',
    labelNames: ['operation', 'key_id'] as const,
    registers: [registry],
  })
  return {
    registry,
    countRequest(method: string, route: string, status: number, seconds: number) {
      requests.labels(method, route, String(status)).inc()
      duration.labels(method, route, String(status)).observe(seconds)
    },
    countCall(operation: string, keyId: string) {
      deprecated.labels(operation, keyId).inc()
    },
  }
}

/** The service's own metrics, as `buildApp` sets them up. */
function service() {
  const metrics = createMetrics({ processMetrics: false })
  return { registry: metrics.registry, countRequest: metrics.countRequest, countCall: createDeprecatedCallsCounter(metrics.registry) }
}

type Recorder = ReturnType<typeof reference>

const METHODS = ['GET', 'POST', 'DELETE', 'HEAD']
// A label value with a quote, a backslash and a newline checks the escaping too.
const ROUTES = ['/v1/pets', '/v1/pets/:petId', 'unmatched', '/odd/"quoted"\\path\nline']
const STATUSES = [200, 201, 304, 404, 429, 503]
const above = (x: number) => x * (1 + Number.EPSILON)
const below = (x: number) => x * (1 - Number.EPSILON)
// On, just under and just over every bound; zero; far above the last; and fractions whose sum rounds.
const DURATIONS = [0, 1e-9, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 0.000123456789, 7, 1e6, ...BUCKETS.flatMap((bound) => [bound, below(bound), above(bound)])]

interface Request {
  method: string
  route: string
  status: number
  seconds: number
}

/** Every (method, route, status) with every duration, in an order shuffled by a fixed seed. */
function grid(): Request[] {
  const requests: Request[] = []
  for (const method of METHODS) {
    for (const route of ROUTES) {
      for (const status of STATUSES) {
        for (const seconds of DURATIONS) requests.push({ method, route, status, seconds })
      }
    }
  }
  let seed = 24
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
  for (let i = requests.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[requests[i], requests[j]] = [requests[j] as Request, requests[i] as Request]
  }
  return requests
}

const KEYS = ['key_a', 'key_b', 'key_c"\\\n']
const OPERATIONS = ['getPet', 'otherOperation']

function record(recorders: readonly Recorder[], requests: readonly Request[]): void {
  requests.forEach(({ method, route, status, seconds }, i) => {
    for (const recorder of recorders) {
      recorder.countRequest(method, route, status, seconds)
      if (i % 7 === 0) recorder.countCall(OPERATIONS[i % 2] ?? '', KEYS[i % 3] ?? '')
    }
  })
}

async function assertSameScrape(actual: Registry, expected: Registry, when: string): Promise<void> {
  const text = await actual.metrics()
  assert.equal(text, await expected.metrics(), when)
}

describe('the exposition of request and deprecated-call metrics', () => {
  it('equals prom-client recording each request with inc and observe, at every scrape of a grid of requests', async () => {
    const requests = grid()
    const actual = service()
    const expected = reference()
    await assertSameScrape(actual.registry, expected.registry, 'before any request')

    // Some series first seen after the first scrape, others seen before and again after it.
    const third = Math.floor(requests.length / 3)
    record([actual, expected], requests.slice(0, third))
    await assertSameScrape(actual.registry, expected.registry, 'after the first third')
    await assertSameScrape(actual.registry, expected.registry, 'scraped again with nothing new')
    record([actual, expected], requests.slice(third))
    await assertSameScrape(actual.registry, expected.registry, 'after the rest')
    record([actual, expected], requests.slice(0, 50))
    await assertSameScrape(actual.registry, expected.registry, 'after repeats')

    const text = await actual.registry.metrics()
    // Not vacuous: every series of the grid is there, and the sums have rounding in them.
    const series = METHODS.length * ROUTES.length * STATUSES.length
    assert.equal(text.match(/^petstore_http_request_duration_seconds_count\{/gm)?.length, series)
    assert.equal(text.match(/^petstore_http_requests_total\{/gm)?.length, series)
    assert.equal(text.match(/^petstore_deprecated_calls_total\{/gm)?.length, OPERATIONS.length * KEYS.length)
  })

  it('shows a series only once it has counted something, as prom-client does', async () => {
    const actual = service()
    const expected = reference()
    record([actual, expected], [{ method: 'GET', route: '/v1/pets', status: 200, seconds: 0.002 }])
    const text = await actual.registry.metrics()
    assert.equal(text, await expected.registry.metrics())
    assert.doesNotMatch(text, /status="404"/)
    assert.equal(text.match(/^petstore_deprecated_calls_total\{/gm)?.length, 1)
    assert.match(text, /^petstore_http_request_duration_seconds_bucket\{le="0.0025",method="GET",route="\/v1\/pets",status="200"\} 1$/m)
  })

  it('sums across workers as prom-client sums recorded registries (AggregatorRegistry, as with --workers)', async () => {
    const requests = grid()
    const workers = [service(), service()]
    const references = [reference(), reference()]
    const aggregate = async (recorders: readonly Recorder[]) =>
      AggregatorRegistry.aggregate(await Promise.all(recorders.map(({ registry }) => registry.getMetricsAsJSON()))).metrics()
    const quarter = Math.floor(requests.length / 4)
    for (let part = 0; part < 4; part++) {
      const worker = part % 2
      record([workers[worker], references[worker]].filter((recorder) => recorder !== undefined), requests.slice(part * quarter, (part + 1) * quarter))
      assert.equal(await aggregate(workers), await aggregate(references), `after part ${part}`)
    }
  })

  it('starts over with prom-client on resetMetrics()', async () => {
    const requests = grid().slice(0, 500)
    const actual = service()
    const expected = reference()
    record([actual, expected], requests)
    await assertSameScrape(actual.registry, expected.registry, 'before the reset')
    record([actual, expected], requests.slice(0, 100))
    actual.registry.resetMetrics()
    expected.registry.resetMetrics()
    await assertSameScrape(actual.registry, expected.registry, 'just after the reset')
    record([actual, expected], requests.slice(200, 300))
    await assertSameScrape(actual.registry, expected.registry, 'after the reset')
  })
})

describe('the exposition of the standbys', () => {
  /** The standbys' metrics as prom-client shows them when set and counted the straightforward way. */
  function standbysReference(stats: ReplicaStats): Registry {
    const registry = new Registry()
    const lag = new Gauge({
      name: 'petstore_db_replica_lag_seconds',
      help: 'How far each standby of DATABASE_REPLICA_URLS is behind the primary: how long ago the primary passed what it has replayed. Absent while it does not answer.',
      labelNames: ['replica'] as const,
      aggregator: 'max',
      registers: [registry],
    })
    const usable = new Gauge({
      name: 'petstore_db_replica_usable',
      help: 'Whether reads may go to each standby now: 1 when it answers within DATABASE_REPLICA_MAX_LAG_MS, else 0.',
      labelNames: ['replica'] as const,
      aggregator: 'min',
      registers: [registry],
    })
    const reads = new Counter({
      name: 'petstore_db_reads_total',
      help: 'Reads that may go to a standby (read: pet, page or key), by the server that answered them (target: primary or replica).',
      labelNames: ['read', 'target'] as const,
      registers: [registry],
    })
    for (const replica of stats.replicas) {
      if (replica.lagSeconds !== undefined) lag.labels(replica.name).set(replica.lagSeconds)
      usable.labels(replica.name).set(replica.usable ? 1 : 0)
    }
    for (const [read, targets] of Object.entries(stats.reads)) for (const [target, count] of Object.entries(targets)) reads.labels(read, target).inc(count)
    return registry
  }

  const only = (text: string) => text.split('\n').filter((line) => /petstore_db_(replica|reads)/.test(line)).join('\n')
  const figures = (lagSeconds: number | undefined, usable: boolean, replicaReads: number): ReplicaStats => ({
    replicas: [
      { name: 'standby-1:5432/petstore', lagSeconds: 0.25, usable: true },
      { name: 'standby-2:5432/petstore', lagSeconds, usable },
    ],
    reads: { pet: { primary: 3, replica: replicaReads }, page: { primary: 1, replica: 2 }, key: { primary: 9, replica: 0 } },
  })

  it('shows each standby’s lag (none while it does not answer), whether it is used, and reads by target, as read at each scrape', async () => {
    const metrics = createMetrics({ processMetrics: false })
    let stats = figures(1.5, false, 7)
    metrics.watchReplicas(() => stats)
    assert.equal(only(await metrics.registry.metrics()), only(await standbysReference(stats).metrics()))
    stats = figures(undefined, false, 12)
    const text = only(await metrics.registry.metrics())
    assert.equal(text, only(await standbysReference(stats).metrics()))
    assert.doesNotMatch(text, /lag_seconds\{replica="standby-2/)
    assert.match(text, /^petstore_db_reads_total\{read="pet",target="replica"\} 12$/m)
  })

  it('shows the worst lag and state over --workers, and the reads summed', async () => {
    const workers = [figures(0.5, true, 1), figures(3, false, 2)]
    const registries = workers.map((stats) => {
      const metrics = createMetrics({ processMetrics: false })
      metrics.watchReplicas(() => stats)
      return metrics.registry
    })
    const aggregate = async (of: Registry[]) => only(await AggregatorRegistry.aggregate(await Promise.all(of.map((registry) => registry.getMetricsAsJSON()))).metrics())
    const text = await aggregate(registries)
    assert.equal(text, await aggregate(workers.map(standbysReference)))
    assert.match(text, /^petstore_db_replica_lag_seconds\{replica="standby-2:5432\/petstore"\} 3$/m)
    assert.match(text, /^petstore_db_replica_usable\{replica="standby-2:5432\/petstore"\} 0$/m)
    assert.match(text, /^petstore_db_reads_total\{read="pet",target="replica"\} 3$/m)
  })
})
