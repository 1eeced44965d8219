import type pg from 'pg'
import {
  CALLERS_QUERY,
  type DeprecatedCallerRow,
  type DeprecatedCalls,
  type DeprecationsRepository,
  toDeprecatedCaller,
} from './deprecations.repository.js'

export function createPostgresDeprecationsRepository(pool: pg.Pool): DeprecationsRepository {
  return {
    async add(counts) {
      if (counts.length === 0) return
      // One statement for every key: a single statement is its own transaction. Sorted by key, so
      // that two processes adding the same keys lock their rows in the same order (no deadlock).
      const order = (c: DeprecatedCalls) => `${c.operation}\u0000${c.keyId}`
      const sorted = [...counts].sort((a, b) => (order(a) < order(b) ? -1 : 1))
      await pool.query(
        `INSERT INTO deprecated_calls (operation, api_key_id, calls, first_seen, last_seen)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
         ON CONFLICT (operation, api_key_id) DO UPDATE SET
           calls = deprecated_calls.calls + excluded.calls,
           first_seen = least(deprecated_calls.first_seen, excluded.first_seen),
           last_seen = greatest(deprecated_calls.last_seen, excluded.last_seen)`,
        [
          sorted.map((c) => c.operation),
          sorted.map((c) => c.keyId),
          sorted.map((c) => c.calls),
          sorted.map((c) => c.firstSeen),
          sorted.map((c) => c.lastSeen),
        ],
      )
    },
    async callers(operation) {
      const { rows } = await pool.query<DeprecatedCallerRow>(CALLERS_QUERY('$1'), [operation])
      return rows.map(toDeprecatedCaller)
    },
  }
}
