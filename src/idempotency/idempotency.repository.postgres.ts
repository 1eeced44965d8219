import type pg from 'pg'
import type { NewPet } from '../pets/pets.repository.js'
import { insertPostgresPet } from '../pets/pets.repository.postgres.js'
import { type IdempotencyRepository, type IdempotencyRow, toHeldRecord } from './idempotency.repository.js'

const THE_RECORD = 'api_key_id = $1 AND idempotency_key = $2'
const HELD_BY_ATTEMPT = `${THE_RECORD} AND attempt_id = $3 AND response_status IS NULL`
/** Abandoned in progress (created before $3) or expired (created before $4): free to take over. */
const STALE = '((response_status IS NULL AND created_at < $3) OR created_at < $4)'

/**
 * Each step below may find that another attempt changed the record since the previous one (it
 * was released, pruned or taken over); the next round then sees the new state. Only a
 * pathological run of such races could exhaust these tries.
 */
const CLAIM_TRIES = 5

export function createPostgresIdempotencyRepository(pool: pg.Pool): IdempotencyRepository {
  // Runs `work` in one transaction on one connection. A connection whose ROLLBACK fails is
  // discarded rather than returned to the pool in an unknown state.
  async function inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect()
    let broken: Error | undefined
    try {
      await client.query('BEGIN')
      const result = await work(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError))
      })
      throw error
    } finally {
      client.release(broken)
    }
  }

  return {
    async claim({ scope, key, attemptId }, { fingerprint, now, abandonedBefore, expiredBefore }) {
      for (let tries = 0; tries < CLAIM_TRIES; tries++) {
        const inserted = await pool.query({
          name: 'idempotency-insert',
          text: `INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, attempt_id, created_at)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (api_key_id, idempotency_key) DO NOTHING`,
          values: [scope, key, fingerprint, attemptId, now],
        })
        if (inserted.rowCount === 1) return undefined
        // Read first: a replay or a 409, the usual outcomes here, then writes nothing (no commit to flush).
        const { rows } = await pool.query<IdempotencyRow & { stale: boolean }>({
          name: 'idempotency-find',
          text: `SELECT fingerprint, response_status, response_location, response_body, ${STALE} AS stale
                 FROM idempotency_keys WHERE ${THE_RECORD}`,
          values: [scope, key, abandonedBefore, expiredBefore],
        })
        const row = rows[0]
        if (row === undefined) continue // released or pruned meanwhile: the key is free again
        if (!row.stale) return toHeldRecord(row)
        // The UPDATE checks staleness again under the row lock: of two attempts taking over, one wins.
        const taken = await pool.query({
          name: 'idempotency-take-over',
          text: `UPDATE idempotency_keys SET fingerprint = $5, attempt_id = $6, created_at = $7,
                   response_status = NULL, response_location = NULL, response_body = NULL
                 WHERE ${THE_RECORD} AND ${STALE}`,
          values: [scope, key, abandonedBefore, expiredBefore, fingerprint, attemptId, now],
        })
        if (taken.rowCount === 1) return undefined
      }
      throw new Error(`could not settle the idempotency record in ${CLAIM_TRIES} tries`)
    },

    createPet({ scope, key, attemptId }, pet: NewPet, createdAt, respond) {
      return inTransaction(async (client) => {
        // FOR UPDATE: a concurrent takeover waits for this transaction, then sees it completed.
        const held = await client.query({
          name: 'idempotency-held',
          text: `SELECT 1 FROM idempotency_keys WHERE ${HELD_BY_ATTEMPT} FOR UPDATE`,
          values: [scope, key, attemptId],
        })
        if (held.rowCount !== 1) return undefined
        const response = respond(await insertPostgresPet(client, pet, createdAt))
        await client.query({
          name: 'idempotency-complete',
          text: `UPDATE idempotency_keys SET response_status = $4, response_location = $5, response_body = $6
                 WHERE ${HELD_BY_ATTEMPT}`,
          values: [scope, key, attemptId, response.status, response.location, response.body],
        })
        return response
      })
    },

    async release({ scope, key, attemptId }) {
      await pool.query({
        name: 'idempotency-release',
        text: `DELETE FROM idempotency_keys WHERE ${HELD_BY_ATTEMPT}`,
        values: [scope, key, attemptId],
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
