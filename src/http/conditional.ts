import { hash } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'

/**
 * Responses to reads may be kept by the client's own cache (never a shared one: they answer one
 * key) but must be revalidated before each reuse; with the ETag, that revalidation is a 304.
 */
export const READ_CACHE_CONTROL = 'private, no-cache'

/** A strong validator for a representation made of `parts` (the body and any header that varies with it). */
export function strongEtag(body: string, link: string): string {
  return `"${hash('sha256', `${body}\0${link}`, 'base64url').slice(0, 27)}"`
}

/** `If-None-Match` uses the weak comparison of RFC 9110 §8.8.3.2: `W/` prefixes do not matter. */
export function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag
  return header.split(',').some((candidate) => {
    const tag = candidate.trim()
    return (tag.startsWith('W/') ? tag.slice(2) : tag) === opaque
  })
}

/**
 * onSend hook of a read: gives a 200 its `ETag` and caching headers, and answers `304 Not Modified`
 * without a body when the client already holds this representation (RFC 9110 §13.1.2). The ETag
 * covers the `Link` header as well as the body: the last page of a listing gains a `next` link when
 * pets are added after it, with the same bytes.
 */
export function conditionalGet(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (error: Error | null, payload: unknown) => void,
): void {
  if (reply.statusCode !== 200 || typeof payload !== 'string') return done(null, payload)
  const given = reply.getHeader('etag')
  const etag = typeof given === 'string' ? given : strongEtag(payload, String(reply.getHeader('link') ?? ''))
  reply.header('etag', etag).header('cache-control', READ_CACHE_CONTROL).header('vary', 'Authorization')
  if (!matchesIfNoneMatch(request.headers['if-none-match'], etag)) return done(null, payload)
  reply.code(304).removeHeader('content-type')
  done(null, null)
}
