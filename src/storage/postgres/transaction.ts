import type pg from 'pg'

/**
 * Runs `work` in one transaction on one connection of `pool`, opened with `begin` (`BEGIN` and any
 * `SET LOCAL`s, one round trip). A connection whose ROLLBACK fails is discarded rather than
 * returned to the pool in an unknown state.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  begin: string,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  // A checked-out client has no listener of the pool's: a server that ends the connection during
  // the transaction (a shutdown, pg_terminate_backend) would raise an unhandled 'error' and end the
  // process. The query in flight fails with the same error, and that failure is the one to handle.
  const ignore = () => {}
  client.on('error', ignore)
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
    // A broken client keeps the listener: it may still report as it is destroyed.
    if (broken === undefined) client.off('error', ignore)
    client.release(broken)
  }
}
