import { Readable } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { JSON_CONTENT_TYPE } from '../http/header-names.js'
import type { Representation } from './pets.representation-cache.js'

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
 * Sends a read's answer: a 200 with its ETag and caching headers, or `304 Not Modified` without a body
 * when the client already holds this representation (RFC 9110 §13.1.2). From the handler, not an onSend
 * hook: only these answers have an ETag, and a hook would run on every answer of the route.
 */
export function sendRepresentation(reply: FastifyReply, { body, etag, link }: Representation): FastifyReply {
  const { request } = reply
  const notModified = matchesIfNoneMatch(request.headers['if-none-match'], etag)
  reply.header('etag', etag)
  if (!notModified) reply.type(JSON_CONTENT_TYPE)
  if (link !== undefined) reply.header('link', link)
  // Added to, not replaced: with CORS on, the answer also varies by Origin (src/http/cors.ts, an onRequest hook).
  const vary = reply.getHeader('vary')
  reply.header('cache-control', READ_CACHE_CONTROL).header('vary', vary === undefined ? 'Authorization' : `${String(vary)}, Authorization`)
  if (!notModified) return reply.send(body)
  // No payload at all: `null` would be serialised as JSON. The HEAD route Fastify derives from a GET appends an
  // onSend that would put a Content-Length on none (fastify/fastify#6978): an ended stream passes through it
  // as nothing, so that HEAD's 304 carries exactly GET's headers.
  return reply.code(304).send(request.method === 'HEAD' ? Readable.from([]) : undefined)
}
