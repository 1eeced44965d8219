import type { FastifyInstance } from 'fastify'
import { Counter, Gauge, type Metric, Registry, collectDefaultMetrics } from 'prom-client'
import type { PoolStats } from '../storage/database.js'
import type { ReplicaStats } from '../storage/postgres/replica-set.js'
import type { CountOverloaded } from './load-shedding.js'
import { routeOf } from './route.js'

/** The registry of one process, where features add their own counters, and the counters of the HTTP layer. */
export interface Metrics {
  readonly registry: Registry
  /** For `registerRequestMetrics`: one answered request and its duration. */
  readonly countRequest: CountRequest
  /** For the error handler: a request answered 503 because the database could not serve it. */
  readonly countDatabaseUnavailable: () => void
  /** For the load shedding: a request answered 503 `overloaded`. */
  readonly countOverloaded: CountOverloaded
  /** Exports the pool figures of `stats`, read at each scrape. Call it once. */
  watchPool(stats: () => PoolStats): void
  /** Exports each standby's lag and state, and where reads went, read from `stats` at each scrape. Call it once. */
  watchReplicas(stats: () => ReplicaStats): void
  /**
   * Exports when the certificate the API port serves expires, `notAfter()` read at each scrape. Call it
   * once, and only when serving TLS: without it the metric is absent, not 0, which would read as expired.
   */
  watchCertificate(notAfter: () => Date): void
}

type CountRequest = (method: string, route: string, status: number, seconds: number) => void

/**
 * One series of a Counter, counted in a plain number where it happens and handed to prom-client
 * when the registry is scraped (`tallyCounter`).
 */
export interface Tally<L extends string> {
  readonly labels: Readonly<Record<L, string>>
  /** Everything counted since the process started. */
  count: number
  /** Of `count`, what the prom-client Counter holds already. */
  handedOver: number
}

/**
 * A Counter of `registry` whose series are `tallies`. `tallies` must list them in the order they
 * were first counted, and only once counted: that is the order, and the moment, in which `inc` on
 * each call would have made prom-client show them. `forget` empties `tallies` (and whatever finds them).
 *
 * Why: prom-client's `inc`, even on a series from `labels()`, hashes the labels, validates them and
 * returns a new object at every call. Counting in a plain number costs an addition, and the
 * Counter's documented `collect()` hook, which the registry calls at each scrape before reading
 * the values, hands prom-client the increase with one `inc` per series. What a scrape shows, in
 * this process and summed over `--workers` by the AggregatorRegistry, is what `inc` on each call
 * would have shown: a Counter as any other, only told later.
 */
export function tallyCounter<L extends string>(
  registry: Registry,
  config: { name: string; help: string; labelNames: readonly L[] },
  tallies: readonly Tally<L>[],
  forget: () => void,
): void {
  // `registry.resetMetrics()` empties the Counter: the tallies must start over with it, as the series
  // of `labels()` do. The constructor resets too, before anything is counted.
  class TallyCounter extends Counter<L> {
    override reset(): void {
      super.reset()
      forget()
    }
  }
  new TallyCounter({
    ...config,
    registers: [registry],
    collect() {
      for (const tally of tallies) {
        const increase = tally.count - tally.handedOver
        if (increase === 0) continue
        this.inc(tally.labels, increase)
        tally.handedOver = tally.count
      }
    },
  })
}

type RequestLabel = 'method' | 'route' | 'status'

/** The requests of one (method, route, status): their counter and their duration histogram. */
interface RequestSeries extends Tally<RequestLabel> {
  /** Observations per bucket (not cumulative); the last slot holds those above every bound. */
  readonly buckets: Float64Array
  /** Seconds, added in the order of the requests, as prom-client's `observe` adds them. */
  sum: number
}

// Most requests are answered well under the lowest buckets' bounds: those tell a slow database from
// a normal day (docs/decisions/0008-metrics.md); the high ones catch timeouts.
const DURATION_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5]

/** A route label for requests that matched no route: their raw URLs would be unbounded. */
const UNMATCHED_ROUTE = 'unmatched'

/**
 * Creates a registry of its own (never prom-client's global one) with every metric of the
 * service. `processMetrics: false` leaves out prom-client's default process metrics, which start
 * an event-loop monitor and a GC observer that last as long as the process. `release`, the version
 * serving, is told by the process that serves (petstore_build_info is absent without it).
 */
export function createMetrics({ processMetrics = true, release }: { processMetrics?: boolean; release?: string } = {}): Metrics {
  const registry = new Registry()
  if (processMetrics) collectDefaultMetrics({ register: registry })

  if (release !== undefined) {
    // The `*_build_info` convention: which release serves, so that a dashboard shows a rolling deploy's
    // versions side by side, and `--workers` report one series (the same for each), not their count.
    new Gauge({
      name: 'petstore_build_info',
      help: 'Always 1, labelled with the release serving (version) and the Node.js it runs on (node_version).',
      labelNames: ['version', 'node_version'] as const,
      aggregator: 'max',
      registers: [registry],
    })
      .labels(release, process.version)
      .set(1)
  }
  const countRequest = createRequestMetrics(registry)
  const databaseUnavailable = new Counter({
    name: 'petstore_db_unavailable_total',
    help: 'Requests answered 503 because the database could not serve them (busy, full, read-only, unreachable).',
    registers: [registry],
  })
  const overloadRejections = new Counter({
    name: 'petstore_overload_rejections_total',
    help: 'Requests answered 503 overloaded, by the measurement over its threshold (event-loop-delay, heap) or database-pool: a wait for a connection ran out.',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  // Zeroed up front so that a dashboard shows 0, not "no data", for a service that never refused.
  const overloadSeries = {
    'event-loop-delay': overloadRejections.labels('event-loop-delay'),
    heap: overloadRejections.labels('heap'),
    'database-pool': overloadRejections.labels('database-pool'),
  }
  for (const series of Object.values(overloadSeries)) series.inc(0)
  let watchingPool = false
  let watchingCertificate = false
  let watchingReplicas = false

  return {
    registry,
    countRequest,
    countDatabaseUnavailable: () => databaseUnavailable.inc(),
    countOverloaded: (reason) => overloadSeries[reason].inc(),
    watchPool(stats) {
      if (watchingPool) throw new Error('watchPool: this registry already watches a pool')
      watchingPool = true
      new Gauge({
        name: 'petstore_db_pool_connections',
        help: 'Database connections open, by state: busy (lent to a query) or idle.',
        labelNames: ['state'] as const,
        registers: [registry],
        collect() {
          const { total, idle } = stats()
          this.labels('busy').set(total - idle)
          this.labels('idle').set(idle)
        },
      })
      new Gauge({
        name: 'petstore_db_pool_waiting',
        help: 'Queries waiting for a database connection: above 0 for long means the pool is too small.',
        registers: [registry],
        collect() {
          this.set(stats().waiting)
        },
      })
      new Gauge({
        name: 'petstore_db_pool_max_connections',
        help: 'The most connections the pool opens (DATABASE_POOL_SIZE).',
        registers: [registry],
        collect() {
          this.set(stats().max)
        },
      })
    },
    watchReplicas(stats) {
      if (watchingReplicas) throw new Error('watchReplicas: this registry already watches standbys')
      watchingReplicas = true
      new Gauge({
        name: 'petstore_db_replica_lag_seconds',
        help: 'How far each standby of DATABASE_REPLICA_URLS is behind the primary: how long ago the primary passed what it has replayed. Absent while it does not answer.',
        labelNames: ['replica'] as const,
        // Under --workers each polls on its own: the worst view is the one to act on.
        aggregator: 'max',
        registers: [registry],
        collect() {
          this.reset()
          for (const { name, lagSeconds } of stats().replicas) if (lagSeconds !== undefined) this.labels(name).set(lagSeconds)
        },
      })
      new Gauge({
        name: 'petstore_db_replica_usable',
        help: 'Whether reads may go to each standby now: 1 when it answers within DATABASE_REPLICA_MAX_LAG_MS, else 0.',
        labelNames: ['replica'] as const,
        aggregator: 'min',
        registers: [registry],
        collect() {
          for (const { name, usable } of stats().replicas) this.labels(name).set(usable ? 1 : 0)
        },
      })
      const told = new Map<string, number>()
      new Counter({
        name: 'petstore_db_reads_total',
        help: 'Reads that may go to a standby (read: pet, page or key), by the server that answered them (target: primary or replica).',
        labelNames: ['read', 'target'] as const,
        registers: [registry],
        collect() {
          for (const [read, targets] of Object.entries(stats().reads)) {
            for (const [target, count] of Object.entries(targets)) {
              const series = `${read} ${target}`
              this.inc({ read, target }, count - (told.get(series) ?? 0))
              told.set(series, count)
            }
          }
        },
      })
    },
    watchCertificate(notAfter) {
      if (watchingCertificate) throw new Error('watchCertificate: this registry already watches a certificate')
      watchingCertificate = true
      new Gauge({
        name: 'petstore_tls_certificate_not_after_timestamp_seconds',
        help: 'When the TLS certificate the API port serves to new connections expires (its notAfter), in Unix seconds.',
        registers: [registry],
        // Summed over --workers, timestamps would mean nothing. The earliest is the one to renew: a worker
        // still serving an older certificate keeps its expiry in view until every worker has reloaded.
        aggregator: 'min',
        collect() {
          this.set(notAfter().getTime() / 1000)
        },
      })
    },
  }
}

interface HistogramSample {
  value: number
  metricName: string
  labels: Readonly<Record<string, string | number>>
}

/** What prom-client's Registry reads of a metric: for its text, for the AggregatorRegistry's JSON, and on `resetMetrics()`. */
interface RegistryMetric {
  readonly name: string
  readonly help: string
  readonly type: 'histogram'
  readonly aggregator: 'sum'
  get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: HistogramSample[] }>
  reset(): void
}

/**
 * `petstore_http_requests_total` and `petstore_http_request_duration_seconds` in `registry`, and
 * the function that counts one request into both.
 */
function createRequestMetrics(registry: Registry): CountRequest {
  const labelNames = ['method', 'route', 'status'] as const
  // In the order first counted: the order of prom-client's series (see tallyCounter).
  const all: RequestSeries[] = []
  const byMethod = new Map<string, Map<string, Map<number, RequestSeries>>>()
  const forget = () => {
    all.length = 0
    byMethod.clear()
  }

  tallyCounter(registry, { name: 'petstore_http_requests_total', help: 'HTTP requests answered, by method, route template and status.', labelNames }, all, forget)

  // The histogram is an object of our own, registered as a metric. prom-client has no public way to
  // set a Histogram's buckets and sum, so its collect() hook could only replay every observation:
  // that would move `observe`'s cost to the scrape, not save it. Its Registry reads a metric through
  // `get()` and `reset()` alone, and prom-client registers such plain objects itself (the
  // AggregatorRegistry's sums). `get()` gives what a Histogram with these buckets gives, in its order
  // and with its labels in its order; the sum is the same number, the durations being added in the
  // same order. Nothing of it runs per request; a scrape reads each series once.
  const name = 'petstore_http_request_duration_seconds'
  const help = 'Time from the first byte of the request to the end of the response, by method, route template and status.'
  const [bucketName, sumName, countName] = [`${name}_bucket`, `${name}_sum`, `${name}_count`]
  const histogram: RegistryMetric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const values: HistogramSample[] = []
      for (const { labels, buckets, sum, count } of all) {
        let cumulative = 0
        DURATION_BUCKETS.forEach((bound, i) => {
          cumulative += buckets[i] ?? 0
          values.push({ value: cumulative, metricName: bucketName, labels: { le: bound, ...labels } })
        })
        values.push(
          { value: count, metricName: bucketName, labels: { le: '+Inf', ...labels } },
          { value: sum, metricName: sumName, labels },
          { value: count, metricName: countName, labels },
        )
      }
      return Promise.resolve({ name, help, type: 'histogram', aggregator: 'sum', values })
    },
    reset: forget,
  }
  // prom-client's types accept only its own four classes here; the Registry reads what is said above.
  registry.registerMetric(histogram as unknown as Metric)

  return (method, route, status, seconds) => {
    let byRoute = byMethod.get(method)
    if (byRoute === undefined) byMethod.set(method, (byRoute = new Map<string, Map<number, RequestSeries>>()))
    let byStatus = byRoute.get(route)
    if (byStatus === undefined) byRoute.set(route, (byStatus = new Map<number, RequestSeries>()))
    let series = byStatus.get(status)
    if (series === undefined) {
      series = { labels: { method, route, status: String(status) }, count: 0, handedOver: 0, buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0 }
      byStatus.set(status, series)
      all.push(series)
    }
    series.count++
    series.sum += seconds
    // The first bound the duration does not exceed, as prom-client's `observe` finds it. An index
    // loop: for…of leaving early through `break` allocates an iterator at each request.
    let bucket = 0
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] ?? Infinity)) bucket++
    series.buckets[bucket] = (series.buckets[bucket] ?? 0) + 1
  }
}

/**
 * Counts every response in one onResponse hook: requests and their duration by method, route
 * template and status. The series of each (method, route, status) are looked up once and cached,
 * so a request costs a few map lookups and additions.
 */
export function registerRequestMetrics(app: FastifyInstance, metrics: Metrics): void {
  const { countRequest } = metrics
  app.addHook('onResponse', (request, reply, done) => {
    countRequest(request.method, routeOf(request) ?? UNMATCHED_ROUTE, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}
