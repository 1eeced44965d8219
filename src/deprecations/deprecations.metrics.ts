import type { Registry } from 'prom-client'
import { type Tally, tallyCounter } from '../http/metrics.js'

/** Counts one call of a deprecated operation by the key `keyId` (its public id, never the secret). */
export type CountDeprecatedCall = (operationId: string, keyId: string) => void

type DeprecatedCallLabel = 'operation' | 'key_id'

/**
 * `petstore_deprecated_calls_total` in `registry`. One series per (operation, key): bounded by the
 * keys that exist. Each series is looked up once and kept, so a call costs two map lookups and an
 * addition; prom-client is told at each scrape (see tallyCounter).
 */
export function createDeprecatedCallsCounter(registry: Registry): CountDeprecatedCall {
  // In the order first counted, as tallyCounter needs.
  const all: Tally<DeprecatedCallLabel>[] = []
  const byOperation = new Map<string, Map<string, Tally<DeprecatedCallLabel>>>()
  tallyCounter(
    registry,
    {
      name: 'petstore_deprecated_calls_total',
      help: 'Authenticated calls of deprecated operations, by operation and the public id of the calling key.',
      labelNames: ['operation', 'key_id'] as const,
    },
    all,
    () => {
      all.length = 0
      byOperation.clear()
    },
  )
  return (operationId, keyId) => {
    let byKey = byOperation.get(operationId)
    if (byKey === undefined) byOperation.set(operationId, (byKey = new Map<string, Tally<DeprecatedCallLabel>>()))
    let calls = byKey.get(keyId)
    if (calls === undefined) {
      calls = { labels: { operation: operationId, key_id: keyId }, count: 0, handedOver: 0 }
      byKey.set(keyId, calls)
      all.push(calls)
    }
    calls.count++
  }
}
