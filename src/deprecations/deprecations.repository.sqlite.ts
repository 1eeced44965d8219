import type { Database } from 'better-sqlite3'
import {
  CALLERS_QUERY,
  type DeprecatedCallerRow,
  type DeprecatedCalls,
  type DeprecationsRepository,
  toDeprecatedCaller,
} from './deprecations.repository.js'

export function createSqliteDeprecationsRepository(db: Database): DeprecationsRepository {
  const upsert = db.prepare<[string, string, number, number, number]>(
    `INSERT INTO deprecated_calls (operation, api_key_id, calls, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (operation, api_key_id) DO UPDATE SET
       calls = deprecated_calls.calls + excluded.calls,
       first_seen = min(deprecated_calls.first_seen, excluded.first_seen),
       last_seen = max(deprecated_calls.last_seen, excluded.last_seen)`,
  )
  const callers = db.prepare<[string], DeprecatedCallerRow>(CALLERS_QUERY('?'))
  const addAll = db.transaction((counts: readonly DeprecatedCalls[]) => {
    for (const c of counts) upsert.run(c.operation, c.keyId, c.calls, c.firstSeen, c.lastSeen)
  })

  return {
    add(counts) {
      // IMMEDIATE: take the write lock up front, waiting for other processes on the file (--workers).
      addAll.immediate(counts)
      return Promise.resolve()
    },
    callers(operation) {
      return Promise.resolve(callers.all(operation).map(toDeprecatedCaller))
    },
  }
}
