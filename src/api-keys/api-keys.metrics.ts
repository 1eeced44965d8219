import { Counter, type Registry } from 'prom-client'
import type { CountAuthFailure } from './api-keys.auth.js'
import type { CountRateLimited } from './api-keys.rate-limit.js'

/**
 * `petstore_auth_failures_total` in `registry`. Its series are zeroed up front so that a dashboard
 * shows 0, not "no data", for a service that never refused.
 */
export function createAuthFailuresCounter(registry: Registry): CountAuthFailure {
  const authFailures = new Counter({
    name: 'petstore_auth_failures_total',
    help: 'Requests to the API with a missing or an invalid (unknown, revoked, expired, other-environment) key.',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  const series = { missing: authFailures.labels('missing'), invalid: authFailures.labels('invalid') }
  for (const reason of Object.values(series)) reason.inc(0)
  return (reason) => series[reason].inc()
}

/** `petstore_rate_limited_total` in `registry`, zeroed up front as the one above. */
export function createRateLimitedCounter(registry: Registry): CountRateLimited {
  const rateLimited = new Counter({
    name: 'petstore_rate_limited_total',
    help: 'Requests refused with 429, by limit: per-key, or failed-auth (per client address).',
    labelNames: ['limit'] as const,
    registers: [registry],
  })
  const series = { 'per-key': rateLimited.labels('per-key'), 'failed-auth': rateLimited.labels('failed-auth') }
  for (const limit of Object.values(series)) limit.inc(0)
  return (limit) => series[limit].inc()
}
