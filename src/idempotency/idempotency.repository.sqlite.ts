import type { Database } from 'better-sqlite3'
import type { Claim } from '../storage/claim.js'
import { sealSqliteClaim } from '../storage/sqlite/claim.js'
import {
  type HeldRecord,
  type StoredResponse,
  type IdempotencyRepository,
  type IdempotencyRow,
  toHeldRecord,
} from './idempotency.repository.js'

const THE_RECORD = 'api_key_id = ? AND idempotency_key = ?'

export function createSqliteIdempotencyRepository(db: Database): IdempotencyRepository {
  // A conflicting record is replaced only when it is abandoned or expired; RETURNING says whether.
  const take = db.prepare<[string, string, string, string, number, number, number]>(
    `INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, attempt_id, created_at)
     VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
       fingerprint = excluded.fingerprint, attempt_id = excluded.attempt_id, created_at = excluded.created_at,
       response_status = NULL, response_location = NULL, response_body = NULL
     WHERE (idempotency_keys.response_status IS NULL AND idempotency_keys.created_at < ?)
        OR idempotency_keys.created_at < ?
     RETURNING attempt_id`,
  )
  const find = db.prepare<[string, string], IdempotencyRow>(
    `SELECT fingerprint, response_status, response_location, response_body FROM idempotency_keys WHERE ${THE_RECORD}`,
  )
  const complete = db.prepare<[number, string, string, string, string]>(
    `UPDATE idempotency_keys SET response_status = ?, response_location = ?, response_body = ? WHERE ${THE_RECORD}`,
  )
  const prune = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?')

  return {
    // The pets repository runs these inside its IMMEDIATE transaction (pets.repository.sqlite.ts).
    claim(request): Claim<StoredResponse, HeldRecord> {
      const { scope, key, attemptId, fingerprint, now, abandonedBefore, expiredBefore } = request
      return sealSqliteClaim({
        take() {
          if (take.get(scope, key, fingerprint, attemptId, now, abandonedBefore, expiredBefore) !== undefined) return undefined
          const row = find.get(scope, key)
          if (row === undefined) throw new Error('idempotency record vanished inside its transaction')
          return toHeldRecord(row)
        },
        complete(response) {
          complete.run(response.status, response.location, response.body, scope, key)
        },
      })
    },
    prune(before) {
      return Promise.resolve(prune.run(before).changes)
    },
  }
}
