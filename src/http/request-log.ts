import { randomFillSync } from 'node:crypto'
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { Logger } from 'pino'
import { routeOf } from './route.js'
import { REQUEST_ID } from './header-names.js'
import { infoLines } from '../logger.js'

/** The one line logged per request. */
interface RequestLogLine {
  reqId: string
  method: string
  route: string | null
  path?: string
  status: number
  durationMs: number
  /** The error code of an error answer (`unavailable` or `overloaded` tells two 503s apart). */
  code?: string
  keyId?: string
  /** Fastify's `request.ip`: the TCP peer's address, or the one a proxy that TRUST_PROXY trusts forwarded. */
  clientAddress?: string
  /** The TCP peer's address where it is not `clientAddress`: the trusted proxy the request came through. */
  peerAddress?: string
  traceId?: string
  spanId?: string
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Random bytes for request ids, 16 an id, refilled once used up: one call into OpenSSL per 128 ids, as randomUUID makes. */
const idEntropy = Buffer.alloc(16 * 128)
let entropyAt = idEntropy.length
const idText = Buffer.alloc(36)
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1')

/**
 * A random UUID (version 4, RFC 9562), as `crypto.randomUUID` makes, written out as one string. randomUUID
 * joins its 36 characters piece by piece, which V8 keeps as a tree of strings: each later use (the
 * header's check, the log line's JSON) then copies it into one first, or takes a slower path.
 */
export function randomRequestId(): string {
  if (entropyAt === idEntropy.length) {
    randomFillSync(idEntropy)
    entropyAt = 0
  }
  let at = 0
  for (let i = 0; i < 16; i++) {
    if (at === 8 || at === 13 || at === 18 || at === 23) idText[at++] = 0x2d
    const random = idEntropy[entropyAt + i] as number
    // The version's four bits, then the variant's two.
    const byte = i === 6 ? (random & 0x0f) | 0x40 : i === 8 ? (random & 0x3f) | 0x80 : random
    idText[at++] = HEX_DIGITS[byte >> 4] as number
    idText[at++] = HEX_DIGITS[byte & 0x0f] as number
  }
  entropyAt += 16
  return idText.toString('latin1')
}

/**
 * Fastify's `genReqId`: a client-supplied `X-Request-Id` is kept only if it is safe to echo and to
 * log, never one that `containsKey`; any other request gets a UUID.
 */
export function requestIdOf(containsKey: (text: string) => boolean): (request: { headers: FastifyRequest['headers'] }) => string {
  return (request) => {
    const given = request.headers[REQUEST_ID]
    return typeof given === 'string' && SANE_REQUEST_ID.test(given) && !containsKey(given) ? given : randomRequestId()
  }
}

/**
 * Fastify's `childLoggerFactory`: a request logs through the service's logger itself, not through a child
 * made for it (which costs an object and its bindings' JSON per request); each line the service writes
 * about a request names its `reqId` itself.
 */
export const noChildLogger = (logger: FastifyBaseLogger): FastifyBaseLogger => logger

/** The first onRequest hook: every answer carries its request id, refusals included. */
export const echoRequestId: onRequestHookHandler = (request, reply, done) => {
  reply.header(REQUEST_ID, request.id)
  done()
}

interface RequestLogOptions {
  /** LOG_CLIENT_ADDRESS: whether each line names the client's address (personal data, docs/observing.md#logs). */
  clientAddress: boolean
  /** With tracing on, the ids of the request's trace. */
  traceIds: (() => { traceId: string; spanId: string } | undefined) | undefined
  /** The app's logger, through which the lines are written. */
  logger: Logger
}

/** Logs one line per answered request (Fastify's own request logging is off). */
export function registerRequestLog(app: FastifyInstance, { clientAddress, traceIds, logger }: RequestLogOptions): void {
  const log = infoLines(logger, 'request')
  app.addHook('onResponse', (request, reply, done) => {
    const route = routeOf(request)
    const line: RequestLogLine = {
      reqId: request.id,
      method: request.method,
      route: route ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
    }
    if (route === undefined) line.path = request.url.split('?')[0]
    if (request.errorCode !== null) line.code = request.errorCode
    // Who called: the key's public id, never the key.
    if (request.apiKey !== null) line.keyId = request.apiKey.id
    // Where a run of 401s and then 429s came from: the failed-authentication limit counts by this address too.
    if (clientAddress) {
      line.clientAddress = request.ip
      const peer = request.socket.remoteAddress
      if (peer !== undefined && peer !== request.ip) line.peerAddress = peer
    }
    if (traceIds !== undefined) {
      const ids = traceIds()
      if (ids !== undefined) {
        line.traceId = ids.traceId
        line.spanId = ids.spanId
      }
    }
    log(line)
    done()
  })
}
