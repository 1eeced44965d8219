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
export function createRepresentationCache(version: (() => number) | undefined, maxEntries = 4096): RepresentationCache {
  if (version === undefined) return { get: (_key, build) => build() }
  const entries = new Map<string, Representation>()
  let cachedAt = Number.NaN
  return {
    async get(key, build) {
      const before = version()
      if (before !== cachedAt) {
        entries.clear()
        cachedAt = before
      }
      const hit = entries.get(key)
      if (hit !== undefined) return hit
      const built = await build()
      // Kept only if nothing changed while it was read: then it is exactly the data of `before`.
      if (version() === before && cachedAt === before) {
        if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string)
        entries.set(key, built)
      }
      return built
    },
  }
}
