import type pg from 'pg'
import type { Claim } from '../storage/claim.js'
import { sealPostgresClaim } from '../storage/postgres/claim.js'
import {
  type HeldRecord,
  type IdempotencyRepository,
  type IdempotencyRow,
  type IdempotentRequest,
  type StoredResponse,
  toHeldRecord,
} from './idempotency.repository.js'

const THE_RECORD = 'api_key_id = $1 AND idempotency_key = $2'
/** Abandoned in progress (created before $3) or expired (created before $4): free to take over. */
const STALE = '((response_status IS NULL AND created_at < $3) OR created_at < $4)'

/**
 * The bounds of a keyed create's transaction:
 * - lock_timeout: a request with the key of one still running waits this long for it to end, then
 *   is told the key is in use (409);
 * - idle_in_transaction_session_timeout: if the instance running the transaction vanishes without
 *   its connection being closed (a host lost, a partition), the server ends the session, and frees
 *   the key, after this long instead of after TCP's keepalive of hours.
 */
const BEGIN = "BEGIN; SET LOCAL lock_timeout = '5s'; SET LOCAL idle_in_transaction_session_timeout = '10s'"

/** 55P03 lock_not_available: the wait of lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03'

/** A pruning between the two statements of a round frees the key again: the next round takes it. */
const TAKE_TRIES = 3

/**
 * Inside the transaction: gives the request the key's record (a new one, or one that was stale),
 * or resolves to the live record that holds the key. The pets repository takes the record before
 * its insert takes the lock of pet_ids_settled (pets.repository.postgres.ts).
 */
async function takeKey(client: pg.PoolClient, request: IdempotentRequest): Promise<HeldRecord | undefined> {
  const { scope, key, attemptId, fingerprint, now, abandonedBefore, expiredBefore } = request
  for (let tries = 0; tries < TAKE_TRIES; tries++) {
    // ON CONFLICT waits for an uncommitted record of the key to be committed or rolled back.
    const inserted = await client.query({
      name: 'idempotency-insert',
      text: `INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, attempt_id, created_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (api_key_id, idempotency_key) DO NOTHING`,
      values: [scope, key, fingerprint, attemptId, now],
    })
    if (inserted.rowCount === 1) return undefined
    // FOR UPDATE: no one else takes the record over until this transaction ends.
    const { rows } = await client.query<IdempotencyRow & { stale: boolean }>({
      name: 'idempotency-find',
      text: `SELECT fingerprint, response_status, response_location, response_body, ${STALE} AS stale
             FROM idempotency_keys WHERE ${THE_RECORD} FOR UPDATE`,
      values: [scope, key, abandonedBefore, expiredBefore],
    })
    const row = rows[0]
    if (row === undefined) continue
    if (!row.stale) return toHeldRecord(row)
    await client.query({
      name: 'idempotency-take-over',
      text: `UPDATE idempotency_keys SET fingerprint = $3, attempt_id = $4, created_at = $5,
               response_status = NULL, response_location = NULL, response_body = NULL
             WHERE ${THE_RECORD}`,
      values: [scope, key, fingerprint, attemptId, now],
    })
    return undefined
  }
  throw new Error(`could not take the idempotency record in ${TAKE_TRIES} tries`)
}

export function createPostgresIdempotencyRepository(pool: pg.Pool): IdempotencyRepository {
  return {
    claim(request): Claim<StoredResponse, HeldRecord> {
      const { scope, key } = request
      // Whether a lock_timeout would be the wait for another request with the key, not some other wait.
      let waiting = false
      return sealPostgresClaim({
        begin: BEGIN,
        async take(client) {
          waiting = true
          const held = await takeKey(client, request)
          waiting = false
          return held
        },
        async complete(client, response) {
          await client.query({
            name: 'idempotency-complete',
            text: `UPDATE idempotency_keys SET response_status = $3, response_location = $4, response_body = $5
                   WHERE ${THE_RECORD}`,
            values: [scope, key, response.status, response.location, response.body],
          })
        },
        heldOnError(error) {
          return waiting && (error as { code?: unknown }).code === LOCK_NOT_AVAILABLE ? { state: 'in_progress' } : undefined
        },
      })
    },

    async prune(before) {
      const { rowCount } = await pool.query({
        name: 'idempotency-prune',
        text: 'DELETE FROM idempotency_keys WHERE created_at < $1',
        values: [before],
      })
      return rowCount ?? 0
    },
  }
}
