import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'
import { PrimaryUnavailable, isUnavailable } from './errors.js'

/*
 * Reads on streaming standbys (docs/decisions/0023-read-replicas.md). Every POLL_MS each standby is
 * asked how far it has replayed, and the primary how far it has flushed. A standby's lag is how long ago
 * the primary was first seen past the point the standby has replayed: 0 when it has replayed all the
 * primary had at the last poll. This judges lag by catching up, which an idle primary does not fool, as
 * `now() - pg_last_xact_replay_timestamp()` is fooled (it grows while nothing is written). A standby
 * serves reads while its last poll answered, recently, with a lag within the bound.
 */

/** How often the standbys and the primary are asked where they are. */
const POLL_MS = 200

/**
 * Where a server is in the WAL, as a number of bytes: a primary's flush position (what standbys can
 * have: every commit it shows is flushed), a standby's replay position. Evaluated once per statement,
 * after the statement's snapshot was taken, so a page read in the same statement holds nothing past it.
 */
export const POSITION_SQL =
  "(SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END - '0/0'::pg_lsn)::text)"

/** Where a read was answered. */
type ReadTarget = 'primary' | 'replica'
/** The reads that may go to a standby. */
type ReadKind = 'pet' | 'page' | 'key'
const READ_KINDS: readonly ReadKind[] = ['pet', 'page', 'key']

/** One standby as the metrics show it. */
interface ReplicaStat {
  /** host:port/database of its URL: never its user or password. */
  readonly name: string
  /** Seconds behind the primary; undefined while it does not answer. */
  readonly lagSeconds: number | undefined
  /** Whether reads may go there now. */
  readonly usable: boolean
}

export interface ReplicaStats {
  readonly replicas: readonly ReplicaStat[]
  /** Reads answered since the start, by kind and where. */
  readonly reads: Readonly<Record<ReadKind, Readonly<Record<ReadTarget, number>>>>
}

/** How one read goes: which server is asked first, and whose answer stands. */
interface ReadPlan<T> {
  readonly kind: ReadKind
  /** Keys are asked of the primary first (a revocation counts at once); pets and pages of a standby. */
  readonly first: 'primary' | 'replica'
  /** Only a standby that has replayed at least this far may answer (the position a cursor carries). */
  readonly atLeast?: bigint
  /** Whether a standby's answer stands; when it does not, the primary is asked. Default: it stands. */
  readonly stands?: (answer: T) => boolean
  /**
   * With the primary down: what a standby's answer that did not stand becomes. Throw to refuse it (a
   * `PrimaryUnavailable`). Default: it stands after all.
   */
  readonly primaryDown?: (answer: T) => T
}

/** The readers of a primary and its standbys. */
export interface ReplicaSet {
  /** Runs `query` where `plan` says; `from` tells the query which server it is on. */
  read<T>(plan: ReadPlan<T>, query: (on: pg.Pool, from: ReadTarget) => Promise<T>): Promise<T>
  /** Whether some standby may serve reads now: the service is ready for them with the primary gone. */
  readable(): boolean
  stats(): ReplicaStats
  close(): Promise<void>
}

interface Standby {
  readonly name: string
  readonly pool: pg.Pool
  /** Replay position at the last poll that answered. */
  replayed: bigint | undefined
  /** When a poll last answered. */
  answeredAt: number
  /** Set by a read that failed there: out until a poll answers again. */
  failed: boolean
  polling: boolean
  /** The last refusal the operator was told of (a wrong password, no such database), until it answers again. */
  warned: string | undefined
}

/** A poll older than this is not trusted: the standby is out until one answers. */
const POLL_TRUSTED_MS = 5 * POLL_MS

/** host:port/database of a URL, for the metrics and the log: never its user or password. */
function replicaName(url: string): string {
  const parsed = new URL(url)
  return `${parsed.host}${parsed.pathname}`
}

/**
 * The standbys of `urls`, each with a pool made by `openPool`, beside the primary's `primary` pool.
 * `maxLagMs` is DATABASE_REPLICA_MAX_LAG_MS. Polling starts at once and stops at `close()`.
 */
export function createReplicaSet(
  primary: pg.Pool,
  urls: readonly string[],
  maxLagMs: number,
  openPool: (url: string) => pg.Pool,
  { now = Date.now, warn = () => {} }: { now?: () => number; warn?: (message: string) => void } = {},
): ReplicaSet {
  const standbys: Standby[] = urls.map((url) => ({
    name: replicaName(url),
    pool: openPool(url),
    replayed: undefined,
    answeredAt: -Infinity,
    failed: false,
    polling: false,
    warned: undefined,
  }))
  // The primary's positions as polled, strictly increasing, each with when it was first seen: kept long
  // enough to tell any lag up to the bound.
  const history: { at: bigint; seenAt: number }[] = []
  /** A query or a poll of the primary failed, and no poll has answered since. */
  let primaryDown = false
  /** The poll in flight is late: the primary may be out of reach without a refusal (a partition, a pooler waiting for it). */
  let primaryLate = false
  let primaryPolling = false
  let closed = false
  const reads = Object.fromEntries(READ_KINDS.map((kind) => [kind, { primary: 0, replica: 0 }])) as Record<ReadKind, Record<ReadTarget, number>>

  const lagMs = (standby: Standby, at: number): number | undefined => {
    if (standby.replayed === undefined || at - standby.answeredAt > POLL_TRUSTED_MS) return undefined
    // The first position the standby lacks, by bisection: the history holds up to the bound's worth of polls.
    let [low, high] = [0, history.length]
    while (low < high) {
      const middle = (low + high) >>> 1
      if ((history[middle]?.at ?? 0n) > standby.replayed) high = middle
      else low = middle + 1
    }
    const ahead = history[low]
    return ahead === undefined ? 0 : at - ahead.seenAt
  }
  const usable = (standby: Standby, at: number, atLeast = 0n): boolean => {
    if (standby.failed || (standby.replayed ?? -1n) < atLeast) return false
    const lag = lagMs(standby, at)
    return lag !== undefined && lag <= maxLagMs
  }
  let next = 0
  /** Usable standbys, a different one first each time, so reads spread over them. */
  const candidates = (atLeast: bigint | undefined): Standby[] => {
    const at = now()
    const fit = standbys.filter((standby) => usable(standby, at, atLeast))
    next = (next + 1) % Math.max(1, fit.length)
    return [...fit.slice(next), ...fit.slice(0, next)]
  }

  const position = async (pool: pg.Pool): Promise<bigint> => {
    const { rows } = await pool.query<{ at: string }>(`SELECT ${POSITION_SQL} AS at`)
    return BigInt(rows[0]?.at ?? '0')
  }
  const pollPrimary = async () => {
    if (primaryPolling) return
    primaryPolling = true
    // A primary out of reach without a refusal answers nothing for as long as a query may take: key lookups
    // skip it once a poll is this late. Not a standby's miss, which only the primary can tell from a 404.
    const late = setTimeout(() => (primaryLate = true), POLL_TRUSTED_MS)
    late.unref()
    try {
      const at = await position(primary)
      primaryDown = false
      // When the primary reached its first position seen is unknown: long ago, for all this process knows,
      // so a standby behind it lags past any bound until it catches up.
      if (at > (history.at(-1)?.at ?? -1n)) history.push({ at, seenAt: history.length === 0 ? -Infinity : now() })
      // One sample older than the bound is kept: a standby behind it is known to lag past the bound.
      while (history.length > 2 && (history[1]?.seenAt ?? 0) < now() - maxLagMs - POLL_TRUSTED_MS) history.shift()
    } catch {
      primaryDown = true
    } finally {
      clearTimeout(late)
      primaryLate = false
      primaryPolling = false
    }
  }
  const pollStandby = async (standby: Standby) => {
    if (standby.polling) return
    standby.polling = true
    try {
      standby.replayed = await position(standby.pool)
      standby.answeredAt = now()
      standby.failed = false
      standby.warned = undefined
    } catch (error) {
      standby.replayed = undefined
      // A standby that is down comes back by itself; one that refuses this user or lacks the database is
      // the operator's to fix, and serves nothing meanwhile: said once, naming it without its password.
      const reason = (error as Error).message
      if (!isUnavailable(error) && standby.warned !== reason) {
        standby.warned = reason
        warn(`The standby ${standby.name} of DATABASE_REPLICA_URLS refuses to answer, so no read goes there: ${reason}`)
      }
    } finally {
      standby.polling = false
    }
  }
  const poll = () => Promise.all([pollPrimary(), ...standbys.map(pollStandby)])
  void poll()
  const timer = setInterval(() => void poll(), POLL_MS)
  timer.unref()

  /**
   * Whether `standby` has replayed what it had received when asked, and `atLeast`, by `deadline`: asked
   * again every POLL_MS / 10 until then. A standby promoted meanwhile has nothing left to replay.
   */
  const replayedAll = async (standby: Standby, atLeast: bigint | undefined, deadline: number): Promise<boolean> => {
    const { rows } = await standby.pool.query<{ received: string | null }>(`SELECT (pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::text AS received`)
    const received = rows[0]?.received
    const target = received === null || received === undefined ? (atLeast ?? 0n) : BigInt(received) > (atLeast ?? 0n) ? BigInt(received) : (atLeast ?? 0n)
    for (;;) {
      // What it answers is a poll's answer too: its lag is judged on it, however late the last poll.
      standby.replayed = await position(standby.pool)
      standby.answeredAt = now()
      standby.failed = false
      if (standby.replayed >= target) return true
      if (now() > deadline) return false
      await sleep(POLL_MS / 10)
    }
  }
  const onPrimary = async <T>(query: (on: pg.Pool, from: ReadTarget) => Promise<T>, kind: ReadKind): Promise<{ answer: T } | { error: unknown }> => {
    try {
      const answer = await query(primary, 'primary')
      reads[kind].primary++
      return { answer }
    } catch (error) {
      if (!isUnavailable(error)) throw error
      primaryDown = true
      return { error }
    }
  }

  return {
    async read(plan, query) {
      let primaryError: unknown
      if (plan.first === 'primary' && !primaryDown && !primaryLate) {
        const asked = await onPrimary(query, plan.kind)
        if ('answer' in asked) return asked.answer
        primaryError = asked.error
      }
      if (plan.first === 'replica') {
        for (const standby of candidates(plan.atLeast)) {
          try {
            const answer = await query(standby.pool, 'replica')
            if (!(plan.stands?.(answer) ?? true)) break
            reads[plan.kind].replica++
            return answer
          } catch {
            // Whatever failed there (gone, a query cancelled for a conflict with recovery, a schema not yet
            // replayed) is asked elsewhere; a fault of the query itself shows on the primary.
            standby.failed = true
          }
        }
        if (!primaryDown) {
          const asked = await onPrimary(query, plan.kind)
          if ('answer' in asked) return asked.answer
          primaryError = asked.error
        }
      }
      // The primary is down, or late for a key. A standby answers alone once it has replayed all it had
      // received when asked (a synchronous standby has received every commit acknowledged) and at least
      // `atLeast`, within the lag bound as judged on that; the usable ones are asked first.
      const deadline = now() + maxLagMs
      let refused = false
      const usableFirst = candidates(undefined)
      for (const standby of [...usableFirst, ...standbys.filter((other) => !usableFirst.includes(other))]) {
        try {
          if (!(await replayedAll(standby, plan.atLeast, deadline)) || !usable(standby, now())) continue
          const answer = await query(standby.pool, 'replica')
          const given = (plan.stands?.(answer) ?? true) || plan.primaryDown === undefined ? answer : plan.primaryDown(answer)
          reads[plan.kind].replica++
          return given
        } catch (error) {
          // Refused here (a miss), another standby may have received more.
          if (error instanceof PrimaryUnavailable) refused = true
          else standby.failed = true
        }
      }
      // A late primary may still answer: the last resort of a key no standby could look up. So may one this
      // process holds down while its polls wait (behind a pool full of creates waiting for a synchronous standby):
      // a cursor past every standby was read on a primary since (once it was back: by a query that waited through
      // the outage, or by another instance).
      const pastStandbys = plan.atLeast !== undefined && standbys.every((standby) => (standby.replayed ?? -1n) < (plan.atLeast ?? 0n))
      if (primaryError === undefined && (!primaryDown || pastStandbys) && !refused) {
        const asked = await onPrimary(query, plan.kind)
        if ('answer' in asked) return asked.answer
        primaryError = asked.error
      }
      throw primaryError instanceof Error && !refused ? primaryError : new PrimaryUnavailable(primaryError)
    },
    readable: () => standbys.some((standby) => usable(standby, now())),
    stats: () => {
      const at = now()
      return {
        replicas: standbys.map((standby) => {
          const lag = lagMs(standby, at)
          return { name: standby.name, lagSeconds: lag === undefined ? undefined : lag / 1000, usable: usable(standby, at) }
        }),
        reads,
      }
    },
    async close() {
      if (closed) return
      closed = true
      clearInterval(timer)
      await Promise.all(standbys.map((standby) => standby.pool.end()))
    },
  }
}
