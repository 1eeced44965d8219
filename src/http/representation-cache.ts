import { strongEtag } from './conditional.js'

/** A 200 answer as sent: the JSON body, its ETag, and the `Link` header if it has one. */
export interface Representation {
  body: string
  etag: string
  link?: string
}

export function representation(body: string, link?: string): Representation {
  return link === undefined ? { body, etag: strongEtag(body, '') } : { body, etag: strongEtag(body, link), link }
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
      // Kept only if nothing changed while it was read: then it is exactly the data of `before`.
      if (version() === before && cachedAt === before) {
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
