import type { FastifyInstance } from 'fastify'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { PoolStats } from '../storage/storage.js'
import type { CountOverloaded } from './load-shedding.js'

/** The series the request hook records into. */
interface HttpMetrics {
  readonly requests: Counter<'method' | 'route' | 'status'>
  readonly duration: Histogram<'method' | 'route' | 'status'>
}

/** The registry of one process, where features add their own counters, and the counters of the HTTP layer. */
export interface Metrics {
  readonly registry: Registry
  /** For `registerRequestMetrics`. */
  readonly http: HttpMetrics
  /** For the error handler: a request answered 503 because the database could not serve it. */
  readonly countDatabaseUnavailable: () => void
  /** For the load shedding: a request answered 503 `overloaded`. */
  readonly countOverloaded: CountOverloaded
  /** Exports the pool figures of `stats`, read at each scrape. Call it once. */
  watchPool(stats: () => PoolStats): void
}

interface RequestSeries {
  count: { inc(): void }
  duration: { observe(seconds: number): void }
}

// Most requests are answered well under the lowest buckets' bounds: those tell a slow database from
// a normal day (docs/decisions/0008-metrics.md); the high ones catch timeouts.
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5]

/** A route label for requests that matched no route: their raw URLs would be unbounded. */
const UNMATCHED_ROUTE = 'unmatched'

/**
 * Creates a registry of its own (never prom-client's global one) with every metric of the
 * service. `processMetrics: false` leaves out prom-client's default process metrics, which start
 * an event-loop monitor and a GC observer that last as long as the process.
 */
export function createMetrics({ processMetrics = true }: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry()
  if (processMetrics) collectDefaultMetrics({ register: registry })

  const requests = new Counter({
    name: 'petstore_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'petstore_http_request_duration_seconds',
    help: 'Time from the first byte of the request to the end of the response, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  })
  const databaseUnavailable = new Counter({
    name: 'petstore_db_unavailable_total',
    help: 'Requests answered 503 because the database could not serve them (busy, full, read-only, unreachable).',
    registers: [registry],
  })
  const overloadRejections = new Counter({
    name: 'petstore_overload_rejections_total',
    help: 'Requests answered 503 overloaded, by the measurement over its threshold: event-loop-delay or heap.',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  // Zeroed up front so that a dashboard shows 0, not "no data", for a service that never refused.
  const overloadSeries = { 'event-loop-delay': overloadRejections.labels('event-loop-delay'), heap: overloadRejections.labels('heap') }
  for (const series of Object.values(overloadSeries)) series.inc(0)
  let watchingPool = false

  return {
    registry,
    http: { requests, duration },
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
  }
}

/**
 * Counts every response in one onResponse hook: requests and their duration by method, route
 * template and status. The series of each (method, route, status) are looked up once and cached,
 * so a request costs a few map lookups plus prom-client's own work.
 */
export function registerRequestMetrics(app: FastifyInstance, metrics: Metrics): void {
  const { requests, duration } = metrics.http
  const byMethod = new Map<string, Map<string, Map<number, RequestSeries>>>()

  app.addHook('onResponse', (request, reply, done) => {
    const { method } = request
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE
    let byRoute = byMethod.get(method)
    if (byRoute === undefined) byMethod.set(method, (byRoute = new Map<string, Map<number, RequestSeries>>()))
    let byStatus = byRoute.get(route)
    if (byStatus === undefined) byRoute.set(route, (byStatus = new Map<number, RequestSeries>()))
    const status = reply.statusCode
    let series = byStatus.get(status)
    if (series === undefined) {
      const labels = [method, route, String(status)] as const
      series = { count: requests.labels(...labels), duration: duration.labels(...labels) }
      byStatus.set(status, series)
    }
    series.count.inc()
    series.duration.observe(reply.elapsedTime / 1000)
    done()
  })
}
