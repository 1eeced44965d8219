import pg from 'pg'
import type { PostgresDatabase } from '../database.js'
import { COMPATIBILITY_TABLE, type CompatibilityMark, type RecordedMigrations, assertAllowed, migrationState } from '../migrations/compatibility.js'
import { MIGRATION_NAMES } from '../migrations/names.js'
import { releaseVersion } from '../../shared/release.js'
import { isUnavailable, lostPreparedStatement, waitedForPool } from './errors.js'
import { Answers, type QueryDeadline, type RawQuery, createQueryDeadline } from './query-deadline.js'
import { createReplicaSet } from './replica-set.js'
import { inTransaction } from './transaction.js'

/**
 * The names in Kysely's `schema_migrations` and the marks of breaking ones: none before a migration made
 * their table. Asked whether the tables exist first, since a query of a missing one would end the
 * transaction that `on` may be in.
 */
async function recordedMigrations(on: pg.Pool | pg.PoolClient): Promise<RecordedMigrations> {
  const { rows } = await on.query<{ names: boolean; marks: boolean }>(
    `SELECT to_regclass('schema_migrations') IS NOT NULL AS names, to_regclass('${COMPATIBILITY_TABLE}') IS NOT NULL AS marks`,
  )
  const { names, marks } = rows[0] ?? { names: false, marks: false }
  return {
    names: names ? (await on.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((row) => row.name) : [],
    marks: marks
      ? (await on.query<CompatibilityMark>(`SELECT migration, oldest_release AS "oldestRelease", reason FROM ${COMPATIBILITY_TABLE}`)).rows
      : [],
  }
}

/** The pool's settings; `warn` hears what an operator should fix. */
export interface PostgresOptions {
  url: string
  poolSize: number
  preparedStatements: boolean
  replicaUrls?: readonly string[]
  replicaMaxLagMs?: number
  warn?: (message: string) => void
}

type Query = pg.PoolClient['query']

/**
 * Named queries (`{ name, text, values }`) are prepared once per server connection and then only bound,
 * which saves PostgreSQL parsing and planning them again. A pooler in transaction mode breaks that: each
 * transaction may get another server connection, which never prepared the name, or already has it. So in
 * unnamed mode the pool's connections send every query unnamed (parsed each time, in the same round
 * trip), and the first sign of a lost statement switches a named pool to unnamed for good.
 */
function statementMode(named: boolean, warn: (message: string) => void) {
  const mode = { named }
  const noticed = (error: unknown) => {
    if (!mode.named || !lostPreparedStatement(error)) return
    mode.named = false
    warn(
      'PostgreSQL lost a prepared statement of this connection, as happens behind a pooler in transaction mode (or a pooler ' +
        'moved to a new primary): queries go unnamed from now on. Set DATABASE_PREPARED_STATEMENTS=false for such a pooler.',
    )
  }
  /** Wraps a new connection's `query` so that it obeys the mode and reports what it shows. */
  const adopt = (client: pg.PoolClient) => {
    const query = client.query.bind(client) as unknown as RawQuery
    const wrapped: RawQuery = (config, values, callback) => {
      if (typeof config !== 'object' || config === null || !('name' in config)) return query(config, values, callback)
      const sent = mode.named ? config : { ...config, name: undefined }
      // pg-pool passes a callback; the repositories' own transactions await a promise, and retry
      // themselves (transaction.ts).
      if (typeof values === 'function') [values, callback] = [undefined, values]
      if (typeof callback !== 'function') {
        return (query(sent, values) as Promise<unknown>).catch((error: unknown) => {
          noticed(error)
          throw error
        })
      }
      // A callback is pg-pool's `pool.query`: one statement on its own, which the lost statement kept
      // from running, so it is sent again, unnamed, and the client never sees the switch.
      const done = callback as (error: Error | null, result?: unknown) => void
      return query(sent, values, (error: Error | null, result?: unknown) => {
        if (error === null || !lostPreparedStatement(error) || sent !== config) {
          done(error, result)
          return
        }
        noticed(error)
        query({ ...config, name: undefined }, values, done)
      })
    }
    client.query = wrapped as unknown as Query
  }
  return { adopt }
}

/**
 * A pool of `poolSize` connections to the PostgreSQL server (or pooler) of `url`, its connections adopted by
 * `statements` and their queries timed by `deadline`, their successes marked in `answers`.
 */
function openPool(url: string, poolSize: number, statements: ReturnType<typeof statementMode>, deadline: QueryDeadline, answers?: Answers): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  })
  // An idle connection whose server goes away reports here; unheard, the error would crash the
  // process. The pool drops that connection and the next query meets the outage (a 503) instead.
  pool.on('error', () => {})
  pool.on('connect', (client) => {
    // A connection checked out of the pool has no listener of the pool's. A server that ends it
    // (a shutdown, pg_terminate_backend, a crash) between two of its queries would raise an
    // unhandled 'error' and end the process: seen under the fault matrix. The query in flight, or
    // the next one, fails with the error, and that failure is the one to handle (a 503); the pool
    // discards the connection when it comes back.
    client.on('error', () => {})
    statements.adopt(client)
    deadline.watch(client, answers)
  })
  return pool
}

/**
 * A wait for a connection that ran out counts as load (isOverloaded) when some connection answered within
 * this long: a pool that moves. One whose connections are all stuck has answered nothing for that long.
 */
const POOL_MOVING_MS = 1_000

/**
 * A pool of `poolSize` connections to the PostgreSQL server (or pooler) of `url`, and as many to each
 * standby of `replicaUrls`, which reads may go to (replica-set.ts).
 */
export function openPostgresDatabase({ url, poolSize, preparedStatements, replicaUrls = [], replicaMaxLagMs = 1_000, warn = () => {} }: PostgresOptions): PostgresDatabase {
  const statements = statementMode(preparedStatements, warn)
  const deadline = createQueryDeadline()
  // The primary's alone say whether its pool moves: a failure that reaches the client is the primary's (a
  // standby's sends its read to the primary, replica-set.ts).
  const primaryAnswers = new Answers()
  const pool = openPool(url, poolSize, statements, deadline, primaryAnswers)
  const replicas =
    replicaUrls.length === 0
      ? undefined
      : createReplicaSet(pool, replicaUrls, replicaMaxLagMs, (standby) => openPool(standby, poolSize, statements, deadline), { warn })
  let ended = false
  const isOverloaded = (error: unknown) => waitedForPool(error) && primaryAnswers.within(POOL_MOVING_MS)

  return {
    engine: 'postgres',
    pool,
    ...(replicas === undefined ? {} : { replicas, replicaStats: () => replicas.stats() }),
    async migrationState() {
      return migrationState(await recordedMigrations(pool), MIGRATION_NAMES.postgres)
    },
    async migrate(release = releaseVersion()) {
      const state = migrationState(await recordedMigrations(pool), MIGRATION_NAMES.postgres)
      assertAllowed(state, release)
      // Kysely and the migrations are loaded only to apply one: memory the server would keep for nothing (ADR 2).
      if (state.pending.length === 0) return { applied: [], unknown: state.unknown }
      const [{ Kysely }, { runMigrations }, { postgresMigrations }, { MigrationDialect }] = await Promise.all([
        import('kysely'),
        import('../migrations/run-migrations.js'),
        import('../migrations/postgres/index.js'),
        import('./migration-dialect.js'),
      ])
      // One transaction on one connection for the whole run, behind a transaction advisory lock
      // (which a pooler in transaction mode keeps), so that instances starting at once apply each
      // migration exactly once, and all of them or none.
      return inTransaction(pool, "BEGIN; SELECT pg_advisory_xact_lock(hashtext('petstore migrations'))", async (client) => {
        const locked = migrationState(await recordedMigrations(client), MIGRATION_NAMES.postgres)
        assertAllowed(locked, release)
        const kysely = new Kysely<unknown>({ dialect: new MigrationDialect(client) })
        return { applied: await runMigrations(kysely, postgresMigrations, locked.unknown), unknown: locked.unknown }
      })
    },
    isUnavailable,
    isOverloaded,
    async ping() {
      try {
        await pool.query('SELECT 1')
      } catch (error) {
        // With the primary gone, standbys still serve reads: the instance stays in its balancer's rotation.
        // Not with its pool too busy for the primary: another instance may have room.
        if (replicas?.readable() !== true || !isUnavailable(error) || isOverloaded(error)) throw error
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: poolSize }),
    async close() {
      if (ended) return
      ended = true
      await Promise.all([pool.end(), replicas?.close()])
      deadline.close()
    },
  }
}
