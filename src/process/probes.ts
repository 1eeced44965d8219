import { ApiError } from '../errors.js'
import { JSON_CONTENT_TYPE } from '../http/header-names.js'

/**
 * What the metrics port answers and the thread that listens there (src/process/probe-thread.ts) says
 * to the main thread. Loaded by that thread too, so it loads nothing heavy: no Fastify, no prom-client.
 */

/** An answer made on one thread and sent by another. */
export interface ProbeAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** What liveness answers, on either port, while the process runs. */
export const LIVE_BODY = { status: 'ok' } as const

/** An error in the service's shape, as src/http/error-handler.ts sends it. */
export function toProbeAnswer(error: ApiError): ProbeAnswer {
  return {
    status: error.status,
    headers: { ...error.headers, 'cache-control': 'no-store', 'content-type': JSON_CONTENT_TYPE },
    body: JSON.stringify(error.toBody()),
  }
}

/**
 * How long the main thread's event loop may go without turning before liveness fails. A loop that
 * has not turned for this long answers nothing (the request timeout is as long): it is hung, not
 * busy, and a restart is the cure. A busy one turns many times a second, whatever its queue holds.
 */
export const LIVENESS_BOUND_MS = 10_000

/** How often the main thread says it is turning: well within LIVENESS_BOUND_MS, and cheap. */
export const HEARTBEAT_MS = 250

/** Liveness, from how long ago the main thread's event loop last turned. */
export function livenessAnswer(heartbeatAgeMs: number): ProbeAnswer {
  if (heartbeatAgeMs <= LIVENESS_BOUND_MS) {
    return { status: 200, headers: { 'content-type': JSON_CONTENT_TYPE }, body: JSON.stringify(LIVE_BODY) }
  }
  return toProbeAnswer(
    new ApiError('unavailable', `The service's event loop has not turned for ${Math.floor(heartbeatAgeMs / 1000)} s: it is hung.`),
  )
}

/**
 * How long the listener waits for the main thread's readiness (within an orchestrator's usual 1 s
 * probe timeout) before answering 503 `overloaded` itself: a process too busy to say whether it is
 * ready within that time is not.
 */
export const READINESS_WAIT_MS = 500

/** The shared memory behind the heartbeat: the main thread's last turn, in process.hrtime nanoseconds. */
export const newHeartbeat = (): BigInt64Array => new BigInt64Array(new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT))

/** What the listener thread starts with. */
export interface ProbeListenerData {
  port: number
  host: string
  heartbeat: BigInt64Array
  /** The API port's (REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS). */
  timeouts: { requestMs: number; headersMs: number; keepAliveMs: number }
  /** The most connections the listener holds at once (src/process/descriptors.ts). */
  maxConnections: number
}

/** What the listener thread asks the main thread for. */
export type Question = '/readyz' | '/metrics'

/** From the listener thread to the main thread. */
export type FromListener =
  | { type: 'listening'; port: number; address: string; family: string }
  | { type: 'listen-failed'; code: string | undefined; message: string }
  | { type: 'ask'; id: number; question: Question }
  | { type: 'refused'; reason: 'cap' | 'descriptors'; count: number }

/** From the main thread to the listener thread. */
export type ToListener = { type: 'answer'; id: number; answer: ProbeAnswer } | { type: 'close' }
