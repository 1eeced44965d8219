import { Type } from '@sinclair/typebox'
import type { FastifyInstance } from 'fastify'
import type { Storage } from '../storage/storage.js'
import { ApiError } from '../errors.js'

const hidden = { hide: true } as const

/** Liveness and readiness for load balancers and orchestrators; no authentication. */
export function registerHealthRoutes(app: FastifyInstance, storage: Storage): void {
  const ok = Type.Object({ status: Type.Literal('ok') })

  app.get('/healthz', { schema: { ...hidden, response: { 200: ok } } }, async () => ({ status: 'ok' as const }))

  app.get('/readyz', { schema: { ...hidden, response: { 200: ok } } }, async (request) => {
    try {
      await storage.ping()
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed')
      throw new ApiError('unavailable', 'The database is not answering.', { 'retry-after': '5' })
    }
    return { status: 'ok' as const }
  })
}
