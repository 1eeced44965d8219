/**
 * The metrics port's listener, run in a worker thread of its own (src/process/operations-listener.ts starts
 * it). It accepts, reads and answers on its own event loop, so that thousands of connections
 * keeping the main thread's loop busy cannot make a probe wait: liveness is answered here from the
 * main thread's heartbeat, readiness and `/metrics` are asked of the main thread, readiness
 * within READINESS_WAIT_MS.
 */
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { parentPort, workerData } from 'node:worker_threads'
import { ApiError } from '../errors.js'
import { CONNECTIONS_CHECKING_INTERVAL_MS, http } from '../http/node-http.js'
import {
  type FromListener,
  type ProbeAnswer,
  type ProbeListenerData,
  type Question,
  type ToListener,
  READINESS_WAIT_MS,
  livenessAnswer,
  toProbeAnswer,
} from './probes.js'

const port = parentPort
if (port === null) throw new Error('probe-thread runs as a worker thread, started by src/process/operations-listener.ts')
const { port: listenPort, host, heartbeat, timeouts, maxConnections } = workerData as ProbeListenerData
const tell = (message: FromListener) => port.postMessage(message)

let nextId = 0
const waiting = new Map<number, (answer: ProbeAnswer) => void>()
function ask(question: Question): Promise<ProbeAnswer> {
  const id = nextId++
  return new Promise((resolve) => {
    waiting.set(id, resolve)
    tell({ type: 'ask', id, question })
  })
}

// One question of readiness at a time: probes that come while the main thread is slow to answer
// share it, rather than each adding work to the thread that is already behind.
let readinessAsked: Promise<ProbeAnswer> | undefined
function readiness(): Promise<ProbeAnswer> {
  readinessAsked ??= ask('/readyz').finally(() => (readinessAsked = undefined))
  return new Promise((resolve) => {
    const timer = setTimeout(
      () => resolve(toProbeAnswer(new ApiError('overloaded', `The service did not answer within ${READINESS_WAIT_MS} ms.`, { 'retry-after': '1' }))),
      READINESS_WAIT_MS,
    )
    void readinessAsked?.then((answer) => {
      clearTimeout(timer)
      resolve(answer)
    })
  })
}

function liveness(): ProbeAnswer {
  const ageNs = process.hrtime.bigint() - Atomics.load(heartbeat, 0)
  return livenessAnswer(Number(ageNs / 1_000_000n))
}

function send(response: ServerResponse, { status, headers, body }: ProbeAnswer, head: boolean): void {
  response.writeHead(status, headers).end(head ? undefined : body)
}

// The API port's bounds: this port too listens on every interface by default, and its connections
// are as cheap to open and hold.
const options = {
  requestTimeout: timeouts.requestMs,
  headersTimeout: timeouts.headersMs,
  keepAliveTimeout: timeouts.keepAliveMs,
  connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
}
const server = http.createServer(options, (request, response) => {
  const path = (request.url ?? '/').split('?')[0] ?? '/'
  const head = request.method === 'HEAD'
  if (path !== '/metrics' && path !== '/healthz' && path !== '/readyz') {
    send(response, toProbeAnswer(new ApiError('not_found', `No route ${request.method} ${path}.`)), head)
    return
  }
  if (request.method !== 'GET' && !head) {
    const refusal = toProbeAnswer(new ApiError('method_not_allowed', `${request.method} is not allowed here; allowed: GET, HEAD.`))
    send(response, { ...refusal, headers: { ...refusal.headers, allow: 'GET, HEAD' } }, head)
    return
  }
  if (path === '/healthz') {
    send(response, liveness(), head)
    return
  }
  void (path === '/readyz' ? readiness() : ask('/metrics')).then((answer) => send(response, answer, head))
})

port.on('message', (message: ToListener) => {
  if (message.type === 'answer') {
    waiting.get(message.id)?.(message.answer)
    waiting.delete(message.id)
    return
  }
  // A scrape or probe in progress is answered first; Prometheus keeps its connection alive between
  // scrapes, and an idle one must not hold shutdown. Then nothing is left to keep this thread.
  server.close(() => port.close())
  server.closeIdleConnections()
})

// A connection over the cap is closed by Node as it is accepted ('drop').
server.maxConnections = maxConnections

// Refusals are told to the main thread, which counts them, at most once per REFUSALS_TOLD_MS: a flood of
// connections is not one of messages.
const REFUSALS_TOLD_MS = 250
const refused = { cap: 0, descriptors: 0 }
const tellRefusals = setInterval(() => {
  for (const reason of ['cap', 'descriptors'] as const) {
    if (refused[reason] > 0) tell({ type: 'refused', reason, count: refused[reason] })
    refused[reason] = 0
  }
}, REFUSALS_TOLD_MS).unref()
server.on('drop', () => refused.cap++)
server.on('close', () => clearInterval(tellRefusals))

const CLIENT_ERRORS: Record<string, () => ApiError> = {
  ERR_HTTP_REQUEST_TIMEOUT: () => new ApiError('request_timeout', 'The request took too long to arrive.'),
  HPE_HEADER_OVERFLOW: () => new ApiError('request_header_fields_too_large', 'The request headers are too large.'),
}

// What Node would answer on its own (an empty 408 or 400) is answered in the service's shape, then closed.
server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const { status, headers, body } = toProbeAnswer(CLIENT_ERRORS[error.code ?? '']?.() ?? new ApiError('invalid_request', 'The request is not well-formed HTTP.'))
  const lines = Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' }).map(([name, value]) => `${name}: ${value}\r\n`)
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${lines.join('')}\r\n${body}`)
})

const listenFailed = (error: NodeJS.ErrnoException) => tell({ type: 'listen-failed', code: error.code, message: error.message })
server.once('error', listenFailed)
server.listen(listenPort, host, () => {
  // From now on an error is a connection that could not be accepted for want of a descriptor (libuv
  // closed it): counted, never the end of this thread and of the probes with it.
  server.off('error', listenFailed).on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EMFILE' && error.code !== 'ENFILE') throw error
    refused.descriptors++
  })
  const { port: bound, address, family } = server.address() as AddressInfo
  tell({ type: 'listening', port: bound, address, family })
})
