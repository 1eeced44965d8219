import type pg from 'pg'
import { isLockTimeout, isUnavailable, lostPreparedStatement } from './errors.js'

/**
 * Whether the connection a transaction failed on is to be closed rather than rolled back and reused: one
 * that timed out still has its query outstanding (a ROLLBACK would wait behind it), one to a server that is
 * going away has nothing worth keeping, and one whose prepared statements the server lost would lose them
 * again. Closing it ends the transaction at the server, or at the pooler, as a ROLLBACK would.
 */
function discards(error: unknown): boolean {
  // Lost statements are among the unavailable errors (errors.ts); a lock timeout leaves the connection sound.
  return isUnavailable(error) && !isLockTimeout(error)
}

/**
 * Runs `work` in one transaction on one connection of `pool`, opened with `begin` (`BEGIN` and any
 * `SET LOCAL`s, one round trip). A connection whose ROLLBACK fails is discarded rather than
 * returned to the pool in an unknown state. The pool's connections listen for 'error' themselves
 * (postgres-database.ts).
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  begin: string,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  try {
    return await attempt(pool, begin, work)
  } catch (error) {
    // The first lost prepared statement turns them off (postgres-database.ts) and ended the transaction
    // before anything committed: once more, unnamed, and the client never sees the switch.
    if (!lostPreparedStatement(error)) throw error
    return attempt(pool, begin, work)
  }
}

async function attempt<T>(pool: pg.Pool, begin: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await client.query(begin)
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (error) {
    if (discards(error)) broken = error instanceof Error ? error : new Error(String(error))
    else {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError))
      })
    }
    throw error
  } finally {
    client.release(broken)
  }
}
