import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pg from 'pg'
import { isUnavailable } from '../../src/storage/postgres/errors.js'
import { QUERY_TIMEOUT_MESSAGE, createQueryDeadline } from '../../src/storage/postgres/query-deadline.js'
import { ENGINES, createTestDatabase } from '../helper.js'

// The deadline of every query on PostgreSQL (src/storage/postgres/query-deadline.ts), with a short time
// instead of the service's 15 s: a query past it fails as unavailable (a 503) and its connection is
// dropped; queries within it never fail, however long their connection or transaction has been busy.
const TIMEOUT_MS = 400

for (const engine of ENGINES.filter((engine) => engine !== 'sqlite')) {
  describe(`a query's deadline on ${engine}`, () => {
    /** A pool whose connections the deadline watches, as openPool's are; closed after `use`. */
    async function withPool(use: (pool: pg.Pool) => Promise<void>): Promise<void> {
      const database = await createTestDatabase(engine)
      const deadline = createQueryDeadline(TIMEOUT_MS)
      const pool = new pg.Pool({ connectionString: database.env.DATABASE_URL, max: 2 })
      pool.on('error', () => {})
      pool.on('connect', (client) => {
        client.on('error', () => {})
        deadline.watch(client)
      })
      try {
        await use(pool)
      } finally {
        deadline.close()
        await pool.end()
        await database.drop()
      }
    }

    const sleep = (seconds: number) => `SELECT pg_sleep(${seconds})`

    it('fails a query past its time, through the pool or inside a transaction, as unavailable, and drops its connection', async () => {
      await withPool(async (pool) => {
        for (const how of ['pool.query', 'a transaction'] as const) {
          const startedAt = performance.now()
          const failed = await (async () => {
            if (how === 'pool.query') return pool.query(sleep(3)).then(() => undefined, (error: unknown) => error)
            const client = await pool.connect()
            try {
              await client.query('BEGIN')
              // Queued behind the slow one: it fails with it.
              const [slow, queued] = await Promise.allSettled([client.query(sleep(3)), client.query('SELECT 1')])
              assert.equal(queued.status, 'rejected', 'a query queued behind the one past its time was answered')
              return slow.status === 'rejected' ? (slow.reason as unknown) : undefined
            } finally {
              client.release(true)
            }
          })()
          const tookMs = performance.now() - startedAt
          assert.ok(failed instanceof Error, `${how}: a query past its time was answered`)
          assert.equal(failed.message, QUERY_TIMEOUT_MESSAGE)
          assert.ok(isUnavailable(failed), `${how}: not counted as unavailable`)
          assert.ok(tookMs >= TIMEOUT_MS && tookMs < 2_500, `${how}: failed after ${Math.round(tookMs)} ms`)
        }
        // The connections it ended are gone; a new one serves.
        assert.equal((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one, 1)
      })
    })

    it('never fails queries within their time, one after another on one busy connection for longer than the deadline', async () => {
      await withPool(async (pool) => {
        const client = await pool.connect()
        try {
          const startedAt = performance.now()
          await client.query('BEGIN')
          for (let i = 0; i < 6; i++) await client.query(sleep(TIMEOUT_MS / 2_000))
          await client.query('COMMIT')
          assert.ok(performance.now() - startedAt > 2 * TIMEOUT_MS, 'the connection was not busy past the deadline')
        } finally {
          client.release()
        }
        // And through the pool, callback style, as pg-pool's pool.query sends them.
        for (let i = 0; i < 4; i++) await pool.query(sleep(TIMEOUT_MS / 2_000))
      })
    })
  })
}
