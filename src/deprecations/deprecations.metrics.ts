import { Counter, type Registry } from 'prom-client'

/** Counts one call of a deprecated operation by the key `keyId` (its public id, never the secret). */
export type CountDeprecatedCall = (operationId: string, keyId: string) => void

/**
 * `petstore_deprecated_calls_total` in `registry`. One series per (operation, key): bounded by the
 * keys that exist. Each series is looked up once and kept, so a call costs a map lookup and an `inc`.
 */
export function createDeprecatedCallsCounter(registry: Registry): CountDeprecatedCall {
  const counter = new Counter({
    name: 'petstore_deprecated_calls_total',
    help: 'Authenticated calls of deprecated operations, by operation and the public id of the calling key.',
    labelNames: ['operation', 'key_id'] as const,
    registers: [registry],
  })
  const series = new Map<string, { inc(): void }>()
  return (operationId, keyId) => {
    const id = `${operationId}\u0000${keyId}`
    let calls = series.get(id)
    if (calls === undefined) series.set(id, (calls = counter.labels(operationId, keyId)))
    calls.inc()
  }
}
