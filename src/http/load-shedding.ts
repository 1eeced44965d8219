import v8 from 'node:v8'
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { ApiError, ERROR_DESCRIPTIONS } from '../errors.js'
import { sendError } from './error-handler.js'

/**
 * Why a request was answered 503 `overloaded`: the measurement over its threshold when it was shed, or
 * (`database-pool`, the error handler's) a wait for a database connection that ran out while they answered others.
 */
type OverloadReason = 'event-loop-delay' | 'heap' | 'database-pool'

/** Counts a request answered 503 `overloaded`, for the metrics; the shedding never sees the registry. */
export type CountOverloaded = (reason: OverloadReason) => void

/** Seconds a refused client should wait: a few samples, so that it finds the state measured afresh. */
export const OVERLOAD_RETRY_AFTER_S = 1

// The state changes at most this often. Short enough that shedding starts and stops within a
// fraction of a second; long enough that one slow turn of the loop (a GC pause) is averaged away.
const SAMPLE_INTERVAL_MS = 250

/** The default heap threshold: near the limit, V8 collects garbage nearly all the time. */
const HEAP_LIMIT_SHARE = 0.9

// Liveness must answer however busy the process is, or an orchestrator would restart a process
// that is only loaded, and the load would land on the others. Readiness is shed like the API:
// its 503 is what takes an overloaded instance out of the load balancer's rotation.
const NEVER_SHED = new Set(['/healthz'])

/**
 * Sheds load with @fastify/under-pressure: while the process is over a threshold of `overload`,
 * every new request but liveness is answered at once with 503 `overloaded` and `Retry-After`,
 * before it is parsed, authenticated or handled, instead of waiting in a queue that grows faster
 * than it drains. Register it before the hooks and routes that do the work it saves.
 */
export async function registerLoadShedding(
  app: FastifyInstance,
  { maxEventLoopDelayMs, maxHeapUsedMb }: Config['overload'],
  countOverloaded: CountOverloaded = () => {},
): Promise<void> {
  // One instance for every refusal: under overload, a stack trace per request is work to save.
  const overloaded = new ApiError('overloaded', ERROR_DESCRIPTIONS.overloaded, { 'retry-after': String(OVERLOAD_RETRY_AFTER_S) })
  // Starting (compiling the schemas, opening the database) lags the loop once, and that is not load:
  // nothing is shed until the samples cover only time after the app was ready.
  let armed = false
  app.addHook('onReady', (done) => {
    setTimeout(() => (armed = true), 3 * SAMPLE_INTERVAL_MS).unref()
    done()
  })
  await app.register(underPressure, {
    maxEventLoopDelay: maxEventLoopDelayMs,
    maxHeapUsedBytes:
      maxHeapUsedMb === undefined ? Math.floor(v8.getHeapStatistics().heap_size_limit * HEAP_LIMIT_SHARE) : maxHeapUsedMb * 1024 * 1024,
    sampleInterval: SAMPLE_INTERVAL_MS,
    // Returning nothing without sending lets the request through; after a send, Fastify stops.
    pressureHandler(request, reply, type) {
      const route = request.routeOptions.url
      if (!armed || (route !== undefined && NEVER_SHED.has(route))) return
      countOverloaded(type === underPressure.TYPE_HEAP_USED_BYTES ? 'heap' : 'event-loop-delay')
      sendError(reply, overloaded)
    },
  })
}
