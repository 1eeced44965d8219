/**
 * The metrics port's listener, run in a worker thread of its own (src/process/operations-listener.ts starts
 * it). It accepts, reads and answers on its own event loop, so that thousands of connections
 * keeping the main thread's loop busy cannot make a probe wait: liveness is answered here from the
 * main thread's heartbeat, readiness and `/metrics` are asked of the main thread, readiness
 * within READINESS_WAIT_MS.
 */
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parentPort, workerData } from 'node:worker_threads'
import { ApiError } from '../errors.js'
import { http } from '../http/node-http.js'
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
const { port: listenPort, host, heartbeat } = workerData as ProbeListenerData
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

const server = http.createServer({ requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000 }, (request, response) => {
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

server.once('error', (error: NodeJS.ErrnoException) => tell({ type: 'listen-failed', code: error.code, message: error.message }))
server.listen(listenPort, host, () => {
  const { port: bound, address, family } = server.address() as AddressInfo
  tell({ type: 'listening', port: bound, address, family })
})
