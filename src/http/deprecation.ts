import type { onRequestHookHandler } from 'fastify'
import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'

export interface Deprecation {
  deprecatedAt: Date
  sunset: Date
  /** Path of the operation that replaces the deprecated one. */
  successor: string
}

/**
 * Hooks for a deprecated operation: `headers` announces the deprecation on every response
 * (RFC 9745 `Deprecation`, RFC 8594 `Sunset`, a successor `Link`); `gate` answers 410 from the
 * sunset instant on.
 */
export function deprecationHooks(
  deprecation: Deprecation,
  clock: Clock,
): { headers: onRequestHookHandler; gate: onRequestHookHandler } {
  const headers = {
    deprecation: `@${Math.floor(deprecation.deprecatedAt.getTime() / 1000)}`,
    sunset: deprecation.sunset.toUTCString(),
    link: `<${deprecation.successor}>; rel="successor-version"`,
  }
  const sunsetMs = deprecation.sunset.getTime()
  return {
    headers: (_request, reply, done) => {
      reply.headers(headers)
      done()
    },
    gate: (_request, _reply, done) => {
      if (clock.now() < sunsetMs) return done()
      done(new ApiError('gone', `This operation was removed on ${headers.sunset}. Use GET ${deprecation.successor} instead.`))
    },
  }
}
