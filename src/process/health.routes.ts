import { Type } from 'typebox'
import type { FastifyInstance } from 'fastify'
import { type DatabaseOperations, StorageFault } from '../storage/database.js'
import { ApiError } from '../errors.js'
import { LIVE_BODY } from './probes.js'
import { StringEnum } from '../http/schema-types.js'

const hidden = { hide: true } as const

/** Readiness while the service stops, on either port; `headers` adds to its own. */
export const shuttingDown = (headers: Record<string, string> = {}): ApiError =>
  new ApiError('unavailable', 'The service is shutting down.', { 'retry-after': '1', ...headers })

/**
 * Liveness and readiness for load balancers and orchestrators; no authentication. Readiness
 * fails when the service is shutting down, the database does not answer, or the instance is
 * overloaded (shed, or its database pool too busy to answer in time): a rate-limit store that is down degrades the
 * service (limits are not enforced) but does not stop it, so it is reported, not failed.
 */
export function registerHealthRoutes(
  app: FastifyInstance,
  storage: Pick<DatabaseOperations, 'ping' | 'isOverloaded'>,
  /** The rate limits' store: in memory, Redis, or Redis out of reach. */
  rateLimitStoreStatus: () => 'memory' | 'redis' | 'unavailable',
  isDraining: () => boolean,
): void {
  const ok = Type.Object({ status: Type.Literal('ok') })
  const ready = Type.Object({
    status: StringEnum(['ok', 'degraded'] as const),
    checks: Type.Object({
      database: Type.Literal('ok'),
      rateLimitStore: StringEnum(['memory', 'redis', 'unavailable'] as const),
    }),
  })

  app.get('/healthz', { schema: { ...hidden, response: { 200: ok } } }, async () => LIVE_BODY)

  app.get('/readyz', { schema: { ...hidden, response: { 200: ready } } }, async (request) => {
    // Tells the load balancer to stop sending before the server stops listening; the prober's own
    // connection has no more use.
    if (isDraining()) throw shuttingDown({ connection: 'close' })
    try {
      await storage.ping()
    } catch (error) {
      request.log.warn({ reqId: request.id, err: error }, 'readiness check failed')
      // Its pool too busy to ask the database within its wait: the error handler answers 503 overloaded, as for any request.
      if (storage.isOverloaded(error)) throw error
      const reason = error instanceof StorageFault ? error.message : 'The database is not answering.'
      throw new ApiError('unavailable', reason, { 'retry-after': '5' })
    }
    const rateLimitStore = rateLimitStoreStatus()
    return {
      status: rateLimitStore === 'unavailable' ? ('degraded' as const) : ('ok' as const),
      checks: { database: 'ok' as const, rateLimitStore },
    }
  })
}
