import { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'

/**
 * Responses to reads may be kept by the client's own cache (never a shared one: they answer one
 * key) but must be revalidated before each reuse; with the ETag, that revalidation is a 304.
 */
const READ_CACHE_CONTROL = 'private, no-cache'

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
 * onSend hook of a read whose handler set the `ETag` (see `representation`): gives a 200 its
 * caching headers, and answers `304 Not Modified` without a body when the client already holds
 * this representation (RFC 9110 §13.1.2).
 */
export function conditionalGet(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (error: Error | null, payload: unknown) => void,
): void {
  const etag = reply.getHeader('etag')
  if (reply.statusCode !== 200 || typeof etag !== 'string') return done(null, payload)
  // Added to, not replaced: with CORS on, the answer also varies by Origin (src/http/cors.ts).
  const vary = reply.getHeader('vary')
  reply.header('cache-control', READ_CACHE_CONTROL).header('vary', vary === undefined ? 'Authorization' : `${String(vary)}, Authorization`)
  if (!matchesIfNoneMatch(request.headers['if-none-match'], etag)) return done(null, payload)
  reply.code(304).removeHeader('content-type')
  // The HEAD route Fastify derives from a GET appends a last onSend that reads the payload and throws on
  // null (fastify/fastify#6978), and would put a Content-Length on an empty string: an ended stream is
  // the empty payload it passes on as it is, so that HEAD's 304 carries exactly GET's headers.
  done(null, request.method === 'HEAD' ? Readable.from([]) : null)
}
