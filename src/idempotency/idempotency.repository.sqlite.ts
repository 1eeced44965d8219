import type { Database } from 'better-sqlite3'
import type { NewPet, Pet } from '../pets/pets.repository.js'
import { type SqlitePetChanges, prepareSqlitePetInsert } from '../pets/pets.repository.sqlite.js'
import {
  type IdempotencyRepository,
  type IdempotencyRow,
  type IdempotentOutcome,
  type IdempotentRequest,
  type StoredResponse,
  toHeldRecord,
} from './idempotency.repository.js'

const THE_RECORD = 'api_key_id = ? AND idempotency_key = ?'

export function createSqliteIdempotencyRepository(db: Database, petChanges: SqlitePetChanges): IdempotencyRepository {
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
  const insertPet = prepareSqlitePetInsert(db)
  const complete = db.prepare<[number, string, string, string, string]>(
    `UPDATE idempotency_keys SET response_status = ?, response_location = ?, response_body = ? WHERE ${THE_RECORD}`,
  )
  const prune = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?')

  // IMMEDIATE takes the write lock first: other processes on the same file (--workers) wait for
  // it, so the check that the key is free still holds when the pet is written. The transaction is
  // synchronous: no other request of this process runs inside it, and a crash rolls all of it back.
  const createPet = db.transaction(
    (request: IdempotentRequest, pet: NewPet, respond: (pet: Pet) => StoredResponse): IdempotentOutcome => {
      const { scope, key, attemptId, fingerprint, now, abandonedBefore, expiredBefore } = request
      if (take.get(scope, key, fingerprint, attemptId, now, abandonedBefore, expiredBefore) === undefined) {
        const row = find.get(scope, key)
        if (row === undefined) throw new Error('idempotency record vanished inside its transaction')
        return { held: toHeldRecord(row) }
      }
      const response = respond(insertPet(pet, now))
      complete.run(response.status, response.location, response.body, scope, key)
      return { created: response }
    },
  )

  return {
    createPet(request, pet, respond) {
      const outcome = createPet.immediate(request, pet, respond)
      if ('created' in outcome) petChanges.committed()
      return Promise.resolve(outcome)
    },
    prune(before) {
      return Promise.resolve(prune.run(before).changes)
    },
  }
}
