import type { Database } from 'better-sqlite3'
import type { NewPet, Pet } from '../pets/pets.repository.js'
import { type SqlitePetChanges, prepareSqlitePetInsert } from '../pets/pets.repository.sqlite.js'
import {
  type ClaimOptions,
  type HeldRecord,
  type IdempotencyAttempt,
  type IdempotencyRepository,
  type IdempotencyRow,
  type StoredResponse,
  toHeldRecord,
} from './idempotency.repository.js'

const THE_RECORD = 'api_key_id = ? AND idempotency_key = ?'
const HELD_BY_ATTEMPT = `${THE_RECORD} AND attempt_id = ? AND response_status IS NULL`

export function createSqliteIdempotencyRepository(db: Database, petChanges: SqlitePetChanges): IdempotencyRepository {
  // A conflicting record is replaced only when it is abandoned or expired; RETURNING says whether.
  const upsert = db.prepare<[string, string, string, string, number, number, number]>(
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
  const held = db.prepare<[string, string, string]>(`SELECT 1 FROM idempotency_keys WHERE ${HELD_BY_ATTEMPT}`)
  const insertPet = prepareSqlitePetInsert(db)
  const complete = db.prepare<[number, string, string, string, string, string]>(
    `UPDATE idempotency_keys SET response_status = ?, response_location = ?, response_body = ? WHERE ${HELD_BY_ATTEMPT}`,
  )
  const release = db.prepare<[string, string, string]>(`DELETE FROM idempotency_keys WHERE ${HELD_BY_ATTEMPT}`)
  const prune = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?')

  // IMMEDIATE takes the write lock first: other processes on the same file (--workers) wait for
  // it, so each check below still holds when the writes that depend on it are made.
  const claim = db.transaction(
    ({ scope, key, attemptId }: IdempotencyAttempt, options: ClaimOptions): HeldRecord | undefined => {
      const { fingerprint, now, abandonedBefore, expiredBefore } = options
      if (upsert.get(scope, key, fingerprint, attemptId, now, abandonedBefore, expiredBefore) !== undefined) {
        return undefined
      }
      const row = find.get(scope, key)
      if (row === undefined) throw new Error('idempotency record vanished inside its transaction')
      return toHeldRecord(row)
    },
  )
  const createPet = db.transaction(
    (
      { scope, key, attemptId }: IdempotencyAttempt,
      pet: NewPet,
      createdAt: number,
      respond: (pet: Pet) => StoredResponse,
    ): StoredResponse | undefined => {
      if (held.get(scope, key, attemptId) === undefined) return undefined
      const response = respond(insertPet(pet, createdAt))
      complete.run(response.status, response.location, response.body, scope, key, attemptId)
      return response
    },
  )

  return {
    claim(attempt, options) {
      return Promise.resolve(claim.immediate(attempt, options))
    },
    createPet(attempt, pet, createdAt, respond) {
      const response = createPet.immediate(attempt, pet, createdAt, respond)
      if (response !== undefined) petChanges.committed()
      return Promise.resolve(response)
    },
    release({ scope, key, attemptId }) {
      release.run(scope, key, attemptId)
      return Promise.resolve()
    },
    prune(before) {
      return Promise.resolve(prune.run(before).changes)
    },
  }
}
