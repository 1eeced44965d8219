import type { FastifyInstance } from 'fastify'
import type { Clock } from '../shared/clock.js'
import type { DeprecatedCalls, DeprecationsRepository } from './deprecations.repository.js'

/** How often counts are written by default: the report is at most this far behind. */
const DEPRECATION_FLUSH_INTERVAL_MS = 10_000

/**
 * Counts calls to deprecated operations in memory and writes them in batches, so that a call
 * costs no database write.
 */
export interface DeprecationRecorder {
  /** Counts one call of `operation` by the key `keyId`, now. Never waits, never fails. */
  record(operation: string, keyId: string): void
  /**
   * Writes the counts gathered so far. If the write fails they are kept, merged with newer ones,
   * for the next flush; the error is reported to `onFlushError`, not thrown.
   */
  flush(): Promise<void>
  /** Stops the timer and flushes what is left: for shutdown, before storage closes. */
  close(): Promise<void>
}

export interface DeprecationRecorderDeps {
  deprecations: DeprecationsRepository
  clock: Clock
  /** Default 10 s. The timer is unref'd: it never keeps the process alive. */
  flushIntervalMs?: number
  /** Told about a failed flush (the database is away); the counts wait for the next one. */
  onFlushError: (error: unknown) => void
}

/** Counts by operation, then by key id: a call of a key already counted changes numbers only. */
type Pending = Map<string, Map<string, DeprecatedCalls>>

function merge(into: Pending, counts: DeprecatedCalls): void {
  let byKey = into.get(counts.operation)
  if (byKey === undefined) into.set(counts.operation, (byKey = new Map<string, DeprecatedCalls>()))
  const known = byKey.get(counts.keyId)
  if (known === undefined) {
    byKey.set(counts.keyId, { ...counts })
    return
  }
  known.calls += counts.calls
  known.firstSeen = Math.min(known.firstSeen, counts.firstSeen)
  known.lastSeen = Math.max(known.lastSeen, counts.lastSeen)
}

const allCounts = (pending: Pending): DeprecatedCalls[] => [...pending.values()].flatMap((byKey) => [...byKey.values()])

export function createDeprecationRecorder({
  deprecations,
  clock,
  flushIntervalMs = DEPRECATION_FLUSH_INTERVAL_MS,
  onFlushError,
}: DeprecationRecorderDeps): DeprecationRecorder {
  // One entry per (operation, key): memory is bounded by the number of keys that call, even while
  // the database is away and nothing can be written.
  let pending: Pending = new Map()
  // Flushes run one after another: two at once could both fail and put back the same counts.
  let flushing: Promise<void> = Promise.resolve()

  const writePending = async (): Promise<void> => {
    if (pending.size === 0) return
    const batch = pending
    pending = new Map()
    try {
      await deprecations.add(allCounts(batch))
    } catch (error) {
      for (const counts of allCounts(batch)) merge(pending, counts)
      onFlushError(error)
    }
  }
  const flush = (): Promise<void> => {
    flushing = flushing.then(writePending)
    return flushing
  }

  const timer = setInterval(() => void flush(), flushIntervalMs)
  timer.unref()

  return {
    record(operation, keyId) {
      const now = clock.now()
      const known = pending.get(operation)?.get(keyId)
      if (known === undefined) merge(pending, { operation, keyId, calls: 1, firstSeen: now, lastSeen: now })
      else {
        known.calls++
        known.lastSeen = Math.max(known.lastSeen, now)
      }
    },
    flush,
    async close() {
      clearInterval(timer)
      await flush()
    },
  }
}

/** A recorder for an app built without one (tests, one-off tools): the app flushes it as it closes. */
export function createAppDeprecationRecorder(app: FastifyInstance, deprecations: DeprecationsRepository, clock: Clock): DeprecationRecorder {
  const recorder = createDeprecationRecorder({
    deprecations,
    clock,
    onFlushError: (err) => app.log.warn({ err }, 'getPet calls not recorded yet: the database did not take them'),
  })
  // onClose runs once the server has stopped and requests have finished, before the caller closes storage.
  app.addHook('onClose', () => recorder.close())
  return recorder
}
