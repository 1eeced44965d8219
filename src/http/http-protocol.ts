import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger, onRequestHookHandler } from 'fastify'
import { ApiError } from '../errors.js'
import { sendError } from './error-handler.js'
import { continueWhenBodyIsRead } from './expect-continue.js'
import { IDEMPOTENCY_KEY, JSON_CONTENT_TYPE, REQUEST_ID } from './header-names.js'
import { CONNECTIONS_CHECKING_INTERVAL_MS, http } from './node-http.js'
import { randomRequestId } from './request-log.js'
import { type CertificatePair, STRICT_TRANSPORT_SECURITY, createHttpsServer } from './tls.js'

/*
 * HTTP/1.1 as the service speaks it: what Node's HTTP layer would answer on its own (an empty 400 for a
 * missing Host, an empty 417, nothing at all for CONNECT, a reset after an early answer) is answered here
 * in the service's error shape, and what Node would guess at (two Host headers, a request line without a
 * version, header lines past the 2,000th) is refused.
 */

/** Most header lines a request may carry (Apache's LimitRequestFields); more is 431, never a silent drop. */
export const MAX_HEADER_LINES = 100

/**
 * After an early answer (413, 401, 405… while the body is still coming), the rest of the body is read and
 * thrown away rather than left unread: closing a socket with unread data makes the kernel send a reset,
 * which destroys the answer before the client reads it (nginx's lingering close). At most this much, and
 * no longer than the request timeout, which Node enforces until the request is complete.
 */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024

/** Headers a request may carry once: a second one could make a proxy and the service read different values. */
const SINGLE_HEADERS = ['host', 'authorization', 'content-type', IDEMPOTENCY_KEY, REQUEST_ID]

/**
 * The index in SINGLE_HEADERS of the header `name`, whatever its case, or -1. Runs on every header
 * line of every request, so it allocates nothing: no lower-cased copy, no set of names seen.
 */
function singleHeaderIndex(name: string): number {
  for (let index = 0; index < SINGLE_HEADERS.length; index++) {
    const single = SINGLE_HEADERS[index] ?? ''
    if (name.length === single.length && sameLetters(name, single)) return index
  }
  return -1
}

/**
 * Whether `name` lower-cased is `lower`, as `toLowerCase` would say without making a copy: Node reads
 * a header name's bytes as Latin-1, where no character but A-Z lower-cases to an ASCII letter or `-`.
 */
function sameLetters(name: string, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const code = name.charCodeAt(i)
    const expected = lower.charCodeAt(i)
    if (code !== expected && !(code >= 0x41 && code <= 0x5a && code + 0x20 === expected)) return false
  }
  return true
}

export interface HttpServerOptions {
  timeouts: { requestMs: number; headersMs: number; keepAliveMs: number }
  /**
   * Whether lines name the client's address (LOG_CLIENT_ADDRESS), and whether TRUST_PROXY names proxies:
   * before Fastify has a request, no forwarded address is read, so the TCP peer is the client only without.
   */
  addresses: { log: boolean; behindProxy: boolean }
  /** Serve HTTPS with this pair (src/http/tls.ts); absent: plain HTTP. */
  tls?: CertificatePair
}

/** The headers and body of an answer the service gives before Fastify has a request: it then closes. */
function closingAnswer(error: ApiError, socket: Duplex | null): { headers: Record<string, string>; text: string } {
  const text = JSON.stringify(error.toBody())
  const headers = {
    ...error.headers,
    ...(socket !== null && 'encrypted' in socket ? { 'Strict-Transport-Security': STRICT_TRANSPORT_SECURITY } : {}),
    'X-Request-Id': randomRequestId(),
    'Content-Type': JSON_CONTENT_TYPE,
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
    Connection: 'close',
  }
  return { headers, text }
}

/** Writes `error` on a socket that no HTTP response owns (a parse error, CONNECT), then closes it. */
function answerOnSocket(socket: Duplex, error: ApiError): void {
  const { headers, text } = closingAnswer(error, socket)
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`)
  socket.end(`HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status]}\r\n${lines.join('')}\r\n${text}`)
}

const CLIENT_ERRORS: Record<string, () => ApiError> = {
  HPE_HEADER_OVERFLOW: () => new ApiError('request_header_fields_too_large', 'The request headers are too large.'),
  ERR_HTTP_REQUEST_TIMEOUT: () => new ApiError('request_timeout', 'The request took too long to arrive.'),
}

/** A request line as RFC 9112 §3 writes it, with a method that is a token (RFC 9110 §5.6.2). */
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) \S+ HTTP\/\d\.\d\r?\n/

/**
 * The method of a well-formed request line that Node's parser refused because it does not know the
 * method: an unrecognised method is 501 (RFC 9110 §15.6.2), not malformed HTTP. Node knows HTTP's
 * methods, WebDAV's and a few more (`http.METHODS`); those a path does not serve are 405.
 */
function unknownMethod(error: Error & { rawPacket?: unknown }): string | undefined {
  if (!Buffer.isBuffer(error.rawPacket)) return undefined
  const method = REQUEST_LINE.exec(error.rawPacket.toString('latin1'))?.[1]
  return method !== undefined && !http.METHODS.includes(method) ? method : undefined
}

/** Answers HTTP that Node could not parse, before Fastify sees a request, in the same error shape. */
export function clientErrorHandler(error: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const method = unknownMethod(error)
  const apiError =
    method !== undefined
      ? // A method may be as long as the header block allows: the message quotes only its start.
        new ApiError('not_implemented', `The method ${method.slice(0, 40)} is not one this service knows; methods are case-sensitive.`)
      : (CLIENT_ERRORS[error.code ?? '']?.() ?? new ApiError('invalid_request', 'The request is not well-formed HTTP.'))
  answerOnSocket(socket, apiError)
}

/**
 * Where a connection keeps the answer it is on: that of its latest request, finished or not, since Node
 * answers a connection's requests in order. Set on every request, where a property on the socket costs
 * less than a WeakMap entry or a listener of the response. Read by the lingering close (its request) and
 * by the shutdown drain (src/process/drain.ts), which learns from it whether an answer is in progress.
 */
const CURRENT_ANSWER = Symbol('current answer')

type AnsweringSocket = Socket & { [CURRENT_ANSWER]?: ServerResponse }

/** The servers createHttpServer made: the only ones whose connections record their current answer. */
const answeringServers = new WeakSet<Server>()

/**
 * For a server made by createHttpServer, the answer each of its connections is on (undefined before its
 * first request). Throws for any other server, whose connections record nothing.
 */
export function currentAnswers(server: Server): (socket: Socket) => ServerResponse | undefined {
  if (!answeringServers.has(server)) throw new Error('Only a server made by createHttpServer records the answer each connection is on.')
  return (socket: AnsweringSocket) => socket[CURRENT_ANSWER]
}

/**
 * Replaces Node's `destroySoon` for one connection: when the request being answered still has body to
 * come, the answer is sent with a FIN and the rest of the body is read and discarded until it ends (or
 * LINGER_MAX_BYTES, or the request timeout), so that the client reads the answer instead of a reset.
 */
function lingerBeforeClosing(socket: AnsweringSocket): void {
  // Set here, before any request, so that every connection's socket has the same shape.
  socket[CURRENT_ANSWER] = undefined
  const destroySoon = socket.destroySoon.bind(socket)
  socket.destroySoon = () => {
    const request = socket[CURRENT_ANSWER]?.req
    if (request === undefined || request.complete) {
      destroySoon()
      return
    }
    socket.end()
    const start = socket.bytesRead
    const watch = setInterval(() => {
      if (socket.bytesRead - start > LINGER_MAX_BYTES) socket.destroy()
    }, 100).unref()
    const close = () => {
      clearInterval(watch)
      socket.destroy()
    }
    request.once('end', close)
    socket.once('end', close)
    socket.once('close', () => clearInterval(watch))
  }
}

/**
 * The Node server under Fastify: the timeouts that cut slow clients off, and every answer Node would
 * otherwise give by itself (or not give) in the service's error shape.
 */
export function createHttpServer(handler: RequestListener, { timeouts, tls, addresses }: HttpServerOptions, logger: FastifyBaseLogger): Server {
  // The same fields as src/http/request-log.ts writes, as far as the socket tells them.
  const addressOf = (socket: Duplex): Record<string, string | undefined> => {
    if (!addresses.log) return {}
    const peer = (socket as Partial<Socket>).remoteAddress
    return addresses.behindProxy ? { peerAddress: peer } : { clientAddress: peer }
  }
  const options = {
    requestTimeout: timeouts.requestMs,
    headersTimeout: timeouts.headersMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
    // Node's answer to a missing Host is an empty 400: protocolChecks gives ours instead.
    requireHostHeader: false,
  }
  const listener: RequestListener = (request, response) => {
    const socket: AnsweringSocket = request.socket
    // Sent after the connection's closing answer (behind the body an early answer left unread, say), it
    // could never be answered, and a client would retry a create that was made: RFC 9112 §9.6 forbids
    // acting on it. The connection is closing already.
    if (socket.writableEnded) return
    socket[CURRENT_ANSWER] = response
    handler(request, response)
  }
  const server = tls === undefined ? http.createServer(options, listener) : createHttpsServer(options, tls, listener)
  answeringServers.add(server)
  // Every header line reaches protocolChecks, which refuses more than MAX_HEADER_LINES: Node would drop
  // the lines past its limit silently, an Authorization or Idempotency-Key among them. The size of the
  // header block (16 KiB) still bounds them.
  server.maxHeadersCount = 0
  // Over TLS, HTTP runs on the TLS socket that wraps the TCP one: that is the socket HTTP ends.
  server.on(tls === undefined ? 'connection' : 'secureConnection', lingerBeforeClosing)
  continueWhenBodyIsRead(server)
  // Anything but 100-continue is 417, which Node would send empty.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const socket: AnsweringSocket = request.socket
    socket[CURRENT_ANSWER] = response
    const error = new ApiError('expectation_failed', 'The only expectation this service meets is "Expect: 100-continue".')
    const { headers, text } = closingAnswer(error, request.socket)
    logger.info({ reqId: headers['X-Request-Id'], method: request.method, route: null, status: error.status, code: error.code, ...addressOf(request.socket) }, 'request')
    response.writeHead(error.status, headers).end(text)
  })
  // Node hands CONNECT to this event and closes the connection unanswered when nothing listens.
  server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy())
    // Anything the client sends after its request is read and dropped; the answer closes the connection.
    socket.resume()
    socket.once('end', () => socket.destroy())
    // An empty Allow: no method applies to an authority (RFC 9110 §10.2.1). This is not a proxy.
    const error = new ApiError('method_not_allowed', 'CONNECT is not supported: this server is not a proxy.', { allow: '' })
    logger.info({ method: 'CONNECT', route: null, status: error.status, code: error.code, ...addressOf(socket) }, 'request')
    answerOnSocket(socket, error)
  })
  return server
}

/**
 * The first hook of every request: refuses what Node lets through but would have to guess at. Before
 * routing's answers and authentication, since the request cannot be trusted to mean one thing.
 */
export const protocolChecks: onRequestHookHandler = (request, reply, done) => {
  const raw = request.raw
  const lines = raw.rawHeaders.length / 2
  if (lines > MAX_HEADER_LINES) {
    sendError(reply, new ApiError('request_header_fields_too_large', `The request has ${lines} header lines; at most ${MAX_HEADER_LINES} are accepted.`))
    return
  }
  if (raw.httpVersionMajor !== 1) {
    sendError(reply, new ApiError('invalid_request', 'The request line must end with the protocol version, HTTP/1.1 or HTTP/1.0.'))
    return
  }
  if (raw.httpVersionMinor === 1 && raw.headers.host === undefined) {
    sendError(reply, new ApiError('invalid_request', 'An HTTP/1.1 request must carry a Host header.'))
    return
  }
  // A bit per SINGLE_HEADERS entry rather than a set of names: nothing allocated per request.
  let seen = 0
  for (let i = 0; i < raw.rawHeaders.length; i += 2) {
    const name = raw.rawHeaders[i] ?? ''
    const index = singleHeaderIndex(name)
    if (index === -1) continue
    if ((seen & (1 << index)) !== 0) {
      sendError(reply, new ApiError('invalid_request', `The ${name} header was sent more than once; send it once.`))
      return
    }
    seen |= 1 << index
  }
  done()
}
