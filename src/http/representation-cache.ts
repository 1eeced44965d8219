import { hash } from 'node:crypto'

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

export interface RepresentationCache {
  /** The cached answer for `key`, or `build()`'s, cached while the data it was read from is unchanged. */
  get(key: string, build: () => Promise<Representation>): Promise<Representation>
}

/**
 * Keeps serialised answers until `version()` says the data under them may have changed; then it
 * forgets them all. Exact, never time-based: a client never sees an answer older than the
 * database. Without a `version` (an engine that cannot tell cheaply), nothing is cached.
 */
export function createRepresentationCache(
  version: (() => number) | undefined,
  maxBytes = 8 * 1024 * 1024,
): RepresentationCache {
  if (version === undefined) return { get: (_key, build) => build() }
  // Bounded by the size of the bodies kept (a full page is about 100 times a pet), not by their number.
  const entries = new Map<string, Representation>()
  let bytes = 0
  let cachedAt = Number.NaN
  return {
    async get(key, build) {
      const before = version()
      if (before !== cachedAt) {
        entries.clear()
        bytes = 0
        cachedAt = before
      }
      const hit = entries.get(key)
      if (hit !== undefined) return hit
      const built = await build()
      // Kept only if nothing changed while it was read (versions only grow, so then no other
      // request has emptied the cache meanwhile): it is exactly the data of `before`.
      if (version() === before) {
        // Oldest first, until the new body fits.
        for (const [oldKey, old] of entries) {
          if (bytes + built.body.length <= maxBytes) break
          entries.delete(oldKey)
          bytes -= old.body.length
        }
        if (bytes + built.body.length <= maxBytes) {
          entries.set(key, built)
          bytes += built.body.length
        }
      }
      return built
    },
  }
}
