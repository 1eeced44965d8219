import type pg from 'pg'

/**
 * Runs `work` in one transaction on one connection of `pool`, opened with `begin` (`BEGIN` and any
 * `SET LOCAL`s, one round trip). A connection whose ROLLBACK fails is discarded rather than
 * returned to the pool in an unknown state. The pool's connections listen for 'error' themselves
 * (postgres-storage.ts).
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  begin: string,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await client.query(begin)
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
