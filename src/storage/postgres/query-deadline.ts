import type pg from 'pg'

/** How long a query may run, or wait for its server (a pooler paused), before it fails: a 503. */
const QUERY_TIMEOUT_MS = 15_000

/** How often the connections are looked at: a query fails at most this long after its time is up. */
const SWEEP_MS = 250

/** The message of the error a query past its time fails with; errors.ts counts it as unavailable. */
export const QUERY_TIMEOUT_MESSAGE = 'Query read timeout'

/** A connection's `query`, as its wrappers take it: the config or text, then values, a callback, or both. */
export type RawQuery = (config: unknown, values?: unknown, callback?: unknown) => unknown

/** When a query of the connections watched with it was last answered (not failed): whether their pool moves. */
export class Answers {
  #at = -Infinity

  answered(at: number): void {
    this.#at = at
  }

  within(ms: number): boolean {
    return performance.now() - this.#at <= ms
  }
}

export interface QueryDeadline {
  /** Times the queries of `client` from now on, marking `answers` with each one answered. */
  watch(client: pg.PoolClient, answers?: Answers): void
  /** Stops looking: for the database's close. */
  close(): void
}

/**
 * Fails a query that has run for `timeoutMs`, as node-postgres's `query_timeout` does, by ending its
 * connection: the query, and any queued behind it on that connection, fail with QUERY_TIMEOUT_MESSAGE, and
 * the pool discards the connection. One timer for every connection, where `query_timeout` arms one per
 * query, which held much more peak RSS under a read load (ADR 10, bench/findings.md).
 */
export function createQueryDeadline(timeoutMs = QUERY_TIMEOUT_MS): QueryDeadline {
  const now = () => performance.now()
  // Per connection: its queries not yet answered, and since when the oldest of them has run. node-postgres
  // sends a connection's queries one after another, so when one is answered the next starts.
  const running = new Map<pg.PoolClient, { pending: number; since: number }>()
  const sweep = setInterval(() => {
    const late = now() - timeoutMs
    for (const [client, state] of running) {
      if (state.pending === 0 || state.since > late) continue
      running.delete(client)
      // A pool's connections are Clients. Ended at once, not with `end()`, which waits for a server that may never answer.
      ;(client as unknown as pg.Client).connection.stream.destroy(new Error(QUERY_TIMEOUT_MESSAGE))
    }
  }, SWEEP_MS)
  sweep.unref()
  return {
    watch(client, answers) {
      const state = { pending: 0, since: 0 }
      running.set(client, state)
      client.once('end', () => running.delete(client))
      const query = client.query.bind(client) as unknown as RawQuery
      const answered = () => {
        state.pending--
        state.since = now()
      }
      const succeeded = () => {
        answered()
        answers?.answered(state.since)
      }
      const timed: RawQuery = (config, values, callback) => {
        if (state.pending++ === 0) state.since = now()
        if (typeof values === 'function') [values, callback] = [undefined, values]
        try {
          if (typeof callback === 'function') {
            const done = callback as (error: Error | null, result?: unknown) => void
            return query(config, values, (error: Error | null, result?: unknown) => {
              if (error === null) succeeded()
              else answered()
              done(error, result)
            })
          }
          const result = query(config, values) as Promise<unknown>
          result.then(succeeded, answered)
          return result
        } catch (error) {
          answered()
          throw error
        }
      }
      client.query = timed as unknown as pg.PoolClient['query']
    },
    close() {
      clearInterval(sweep)
      running.clear()
    },
  }
}
