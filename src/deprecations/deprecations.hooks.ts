import type { onRequestHookHandler } from 'fastify'
import type { Clock } from '../shared/clock.js'
import { ApiError } from '../errors.js'
import type { CountDeprecatedCall } from './deprecations.metrics.js'
import type { DeprecationRecorder } from './deprecations.recorder.js'
import { deprecationHeaderValue } from './deprecations.schemas.js'

/** A deprecated operation, as its announcement and its sunset gate need it. */
export interface DeprecatedOperation {
  /** The operationId calls are counted under, e.g. `getPet`. */
  operationId: string
  deprecatedAt: Date
  sunset: Date
  /**
   * URL of the operation that replaces the deprecated one, under `PUBLIC_BASE_URL` as `Location` is: a
   * path alone would lose the base path of a service mounted below its origin (`…/base/v1/pets`).
   */
  successor: string
}

/** The onRequest hooks of a deprecated route, in the order they go around its authentication. */
export interface DeprecationHooks {
  /** First, before authentication: every answer carries the announcement, a 401 included. */
  headers: onRequestHookHandler
  /** After authentication: counts the call against its key, then answers 410 from the sunset on. */
  gate: onRequestHookHandler
}

export interface DeprecationHooksDeps {
  clock: Clock
  /** The usage table behind `petstore deprecations`. */
  recorder: DeprecationRecorder
  /** `petstore_deprecated_calls_total`. */
  countCall: CountDeprecatedCall
}

/**
 * Hooks for a deprecated operation: `headers` announces the deprecation on every response
 * (RFC 9745 `Deprecation`, RFC 8594 `Sunset`, a successor `Link`); `gate` records the call, in
 * the usage table and the Prometheus counter alike, and answers 410 from the sunset instant on.
 */
export function createDeprecationHooks(operation: DeprecatedOperation, { clock, recorder, countCall }: DeprecationHooksDeps): DeprecationHooks {
  const { operationId, successor } = operation
  const headers = {
    deprecation: deprecationHeaderValue(operation.deprecatedAt),
    sunset: operation.sunset.toUTCString(),
    link: `<${successor}>; rel="successor-version"`,
  }
  const sunsetMs = operation.sunset.getTime()
  return {
    headers: (_request, reply, done) => {
      reply.headers(headers)
      done()
    },
    gate: (request, _reply, done) => {
      // Counted after authentication (a key to attribute the call to) and before the sunset check,
      // so that calls answered 410 still show who has not moved; whatever the answer, it was a call.
      // The key's public id only: the secret never reaches the table or a label.
      const key = request.apiKey
      if (key !== null) {
        recorder.record(operationId, key.id)
        countCall(operationId, key.id)
      }
      if (clock.now() < sunsetMs) return done()
      done(new ApiError('gone', `This operation was removed on ${headers.sunset}. Use GET ${successor} instead.`))
    },
  }
}
