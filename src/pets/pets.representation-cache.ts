import { hash } from 'node:crypto'
import type { Clock } from '../shared/clock.js'

/** A 200 answer as sent: the JSON body, its ETag, and the `Link` header if it has one. */
export interface Representation {
  body: string
  etag: string
  link?: string
}

/**
 * An answer and its strong ETag. The ETag covers the `Link` header as well as the body: the last
 * page of a listing gains a `next` link when pets are added after it, with the same bytes.
 */
export function representation(body: string, link?: string): Representation {
  const etag = `"${hash('sha256', `${body}\0${link ?? ''}`, 'base64url').slice(0, 27)}"`
  return link === undefined ? { body, etag } : { body, etag, link }
}

/** What a read built: its answer, and whether any write through the API could ever change it. */
interface Built {
  answer: Representation
  /** True when no write the API can make changes this answer: it is kept even where no `version` is known. */
  final: boolean
  /** The count of rewrites its read saw, on an engine that counts them (`rewrites`). */
  count?: number
}

/**
 * An answer's key: a string, or a number where the answer has one (a pet's id). A number is looked up by
 * its value; a string made for the request is first looked up in V8's table of strings (bench/findings.md).
 */
export type CacheKey = string | number

export interface RepresentationCache {
  /**
   * The cached answer for `key`, at once, or (a promise of) the answer `build()` reads, kept as long as it is
   * known to be current.
   */
  get(key: CacheKey, build: () => Promise<Built>): Representation | Promise<Representation>
  /** What the cache holds: its answers, what they cost (entryCost's sum, within its budget), and the keys it remembers seeing. */
  size(): { entries: number; bytes: number; recentKeys: number }
}

/**
 * What one kept answer costs beyond its strings' characters: the Map's slot, the entry and the
 * answer objects, each string's header. An upper bound of what V8 takes (the figure measured is in
 * docs/decisions/0009-pagination-and-caching.md), so that the budget bounds memory, not payload: an
 * empty page is 2 bytes of body and, before, cost 2 bytes of an 8 MiB budget.
 */
export const ENTRY_OVERHEAD_BYTES = 384

/**
 * The whole cost of keeping `answer` under `key`. The body is counted in UTF-8 bytes, never fewer than
 * V8 stores it in; a string key, the ETag and the Link are ASCII (a valid cursor, the public base URL), a
 * number key a double's 8 bytes.
 */
export function entryCost(key: CacheKey, answer: Representation): number {
  return ENTRY_OVERHEAD_BYTES + (typeof key === 'string' ? key.length : 8) + Buffer.byteLength(answer.body) + answer.etag.length + (answer.link?.length ?? 0)
}

/**
 * The most keys remembered as read in one second, on an engine without a `version`: a flood of distinct
 * keys (forged cursors) is remembered only this far, and its keys are then not kept for coming back.
 */
export const MAX_RECENT_KEYS = 4_096

/**
 * How long a final answer is served from memory, on an engine without a `version`, since it was read or
 * last confirmed. It bounds how late a change made outside the API (an operator's SQL) reaches a reader:
 * the same second in which a revoked key reaches every instance (KEY_RECHECK_MS).
 */
export const FINAL_RECHECK_MS = 1_000

/** How often, while counted answers are read, the count of rewrites is asked, to confirm them for FINAL_RECHECK_MS more. */
export const REWRITES_CONFIRM_MS = FINAL_RECHECK_MS / 2

/** The read cache's budget in bytes of entryCost, unless told otherwise. */
export const READ_CACHE_BUDGET_BYTES = 8 * 1024 * 1024

/**
 * Serialised answers, bounded by what each costs in memory (entryCost: its body, a full page about 100
 * times a pet's, its key and the bookkeeping), the oldest dropped first. So the number of entries is at
 * most `maxBytes / ENTRY_OVERHEAD_BYTES`, however small the answers a client can make it keep.
 *
 * - With `version` (an engine that can tell exactly when any pet may have changed, in any process):
 *   every answer is kept until the version moves, then all are forgotten. Exact for every answer that a
 *   write through the API can change: a client never sees one older than the database. A final answer
 *   asks the version at most once a FINAL_RECHECK_MS, so a change made outside the API reaches it within
 *   that time.
 * - Without it: only final answers are kept, from the second time their key is read within
 *   FINAL_RECHECK_MS, and each is read again once that time has passed (and kept again if it was served
 *   meanwhile). No write through the API, from any instance, can make one stale; a change made outside
 *   the API is seen within that time.
 * - With `rewrites` besides (an engine that counts the statements that changed or removed data, which no
 *   API write does): a final answer read with its count is kept from its first read, and served as long as
 *   a count asked since, within FINAL_RECHECK_MS, is still the one it was read with (until one is, for
 *   FINAL_RECHECK_MS from its read). While such answers are read, the count is asked every
 *   REWRITES_CONFIRM_MS, in the background: one query confirms them all. A change made outside the API is
 *   still seen within FINAL_RECHECK_MS; a count that cannot be asked (the database gone) confirms nothing,
 *   and each answer is read again once that time has passed.
 */
export function createRepresentationCache({
  version,
  clock,
  maxBytes = READ_CACHE_BUDGET_BYTES,
  rewrites,
}: {
  version: (() => number) | undefined
  clock: Clock
  maxBytes?: number
  /** The count of rewrites now (PetsRepository.rewrites), undefined when it cannot be asked. */
  rewrites?: () => Promise<number | undefined>
}): RepresentationCache {
  // `served`: the answer was given from memory at least once (a hit) since it was kept. `count`: of a counted answer.
  const entries = new Map<CacheKey, { answer: Representation; readAt: number; cost: number; final: boolean; served: boolean; count?: number }>()
  let bytes = 0
  const forget = (key: CacheKey) => {
    const old = entries.get(key)
    if (old === undefined) return
    entries.delete(key)
    bytes -= old.cost
  }
  const keep = (key: CacheKey, answer: Representation, readAt: number, final: boolean, count?: number) => {
    forget(key)
    const cost = entryCost(key, answer)
    // One larger than the whole budget is never kept, and empties nothing.
    if (cost > maxBytes) return
    // Oldest first, until the new answer fits; looked for only when it does not, since a Map's iterator steps
    // over the slots its deleted entries left (every answer kept again leaves one) until the Map is rehashed.
    if (bytes + cost > maxBytes) {
      for (const oldKey of entries.keys()) {
        forget(oldKey)
        if (bytes + cost <= maxBytes) break
      }
    }
    entries.set(key, count === undefined ? { answer, readAt, cost, final, served: false } : { answer, readAt, cost, final, served: false, count })
    bytes += cost
  }

  if (version !== undefined) {
    let cachedAt = Number.NaN
    // When the version was last asked. No write through the API can change a final answer, so a hit on
    // one asks it at most once a FINAL_RECHECK_MS: SQLite's pragma is a read transaction, a cached read's
    // largest cost of ours (bench/findings.md), and a change made outside the API reaches a final answer
    // within that time, as on an engine without a version.
    let askedAt = Number.NEGATIVE_INFINITY
    return {
      get(key, build) {
        const now = clock.now()
        const cached = entries.get(key)
        if (cached?.final === true && now - askedAt < FINAL_RECHECK_MS && now >= askedAt) return cached.answer
        askedAt = now
        const before = version()
        if (before !== cachedAt) {
          entries.clear()
          bytes = 0
          cachedAt = before
        }
        const hit = entries.get(key)
        if (hit !== undefined) return hit.answer
        return build().then(({ answer, final }) => {
          // Kept only if nothing changed while it was read (versions only grow, so then no other
          // request has emptied the cache meanwhile): it is exactly the data of `before`.
          if (version() === before) keep(key, answer, 0, final)
          return answer
        })
      },
      size: () => ({ entries: entries.size, bytes, recentKeys: 0 }),
    }
  }
  // The keys read in this second and the last, and when: a final answer is kept only when its key comes
  // back within FINAL_RECHECK_MS of its last read, so that it is likely asked for again before it expires. A
  // scan (every pet once, every page of a walk), or a walk that comes back more slowly, keeps nothing but
  // its keys, where keeping each answer costs CPU per read, and memory and collections for nothing
  // (docs/decisions/0010-performance.md).
  let thisSecond = new Map<CacheKey, number>()
  let lastSecond = new Map<CacheKey, number>()
  let rotatedAt = Number.NEGATIVE_INFINITY
  const cameBack = (key: CacheKey, now: number) => {
    if (now - rotatedAt >= FINAL_RECHECK_MS || now < rotatedAt) {
      lastSecond = now >= rotatedAt && now - rotatedAt < 2 * FINAL_RECHECK_MS ? thisSecond : new Map<CacheKey, number>()
      thisSecond = new Map<CacheKey, number>()
      rotatedAt = now
    }
    const readAt = thisSecond.get(key) ?? lastSecond.get(key)
    if (readAt !== undefined && now - readAt < FINAL_RECHECK_MS && now >= readAt) return true
    if (thisSecond.size < MAX_RECENT_KEYS) thisSecond.set(key, now)
    return false
  }
  // The last count of rewrites asked, and when it was asked: a counted answer read with it is current until
  // FINAL_RECHECK_MS after that. Asked again every REWRITES_CONFIRM_MS while counted answers are read.
  let confirmed = { count: Number.NaN, askedAt: Number.NEGATIVE_INFINITY }
  let confirming = false
  const confirm = (now: number) => {
    if (rewrites === undefined || confirming || (now - confirmed.askedAt < REWRITES_CONFIRM_MS && now >= confirmed.askedAt)) return
    confirming = true
    rewrites().then(
      (count) => {
        confirming = false
        if (count !== undefined) confirmed = { count, askedAt: now }
      },
      () => {
        confirming = false
      },
    )
  }
  return {
    get(key, build) {
      const now = clock.now()
      const hit = entries.get(key)
      if (hit !== undefined) {
        let current = now - hit.readAt < FINAL_RECHECK_MS && now >= hit.readAt
        if (hit.count !== undefined) {
          confirm(now)
          // A count asked since the answer's read decides: the same count confirms it, another shows it changed.
          if (confirmed.askedAt >= hit.readAt) {
            current = hit.count === confirmed.count && now - confirmed.askedAt < FINAL_RECHECK_MS && now >= confirmed.askedAt
          }
        }
        if (current) {
          hit.served = true
          return hit.answer
        }
      }
      return build().then(({ answer, final, count }) => {
        // A counted answer stays current as long as its count is confirmed. Other answers: an expired answer
        // that was served is kept again; one never served is not: its key comes back more slowly than it
        // expires, and must come back within FINAL_RECHECK_MS again to be kept.
        if (final && (count !== undefined || hit?.served === true || cameBack(key, now))) keep(key, answer, now, true, count)
        else forget(key)
        if (count !== undefined) confirm(now)
        return answer
      })
    },
    size: () => ({ entries: entries.size, bytes, recentKeys: thisSecond.size + lastSecond.size }),
  }
}
