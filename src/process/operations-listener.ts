import cluster, { type Worker } from 'node:cluster'
import type { AddressInfo } from 'node:net'
import { Worker as Thread } from 'node:worker_threads'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { AggregatorRegistry } from 'prom-client'
import { type Config, listenFailure } from '../config.js'
import { ApiError } from '../errors.js'
import { shuttingDown } from './health.routes.js'
import type { Metrics } from '../http/metrics.js'
import { type Shedding, outOfDescriptors } from './descriptors.js'
import {
  type FromListener,
  type ProbeAnswer,
  type ProbeListenerData,
  type Question,
  type ToListener,
  HEARTBEAT_MS,
  newHeartbeat,
  toProbeAnswer,
} from './probes.js'

/** The metrics endpoint's own listener. */
export interface MetricsListener {
  readonly address: AddressInfo
  /** Stops listening; a scrape in progress is answered first. */
  close(): Promise<void>
}

export interface MetricsSource {
  /** The text exposition. */
  scrape(): Promise<string>
  contentType: string
}

/** The registry of this process as the metrics endpoint serves it. */
export function processSource(metrics: Metrics): MetricsSource {
  return { scrape: () => metrics.registry.metrics(), contentType: metrics.registry.contentType }
}

/**
 * The primary of `--workers N`: asks every worker for its registry and sums them (prom-client's
 * AggregatorRegistry, over the cluster's IPC channel). Each worker must call `reportToPrimary`.
 */
export function clusterSource(): MetricsSource {
  const aggregator = new AggregatorRegistry()
  return { scrape: () => aggregator.clusterMetrics(), contentType: aggregator.contentType }
}

/**
 * In a cluster worker: answers the primary's requests for this registry. prom-client keeps the
 * registries to report in module state, so only an entry point calls this, once.
 */
export function reportToPrimary(metrics: Metrics): void {
  AggregatorRegistry.setRegistries([metrics.registry])
  // Constructing one is what installs the worker's IPC listener.
  new AggregatorRegistry()
}

// What a readiness answer may carry over; the rest (Connection, Content-Length…) belongs to its own exchange.
const PROBE_HEADERS = ['content-type', 'cache-control', 'retry-after', 'x-request-id'] as const

/** Answers `GET /readyz` for the metrics port. */
export type Readiness = () => Promise<ProbeAnswer>

/**
 * The readiness of this process, answered by the app's own route (src/process/health.routes.ts,
 * through the load shedding like any request) without going through the API port: its accept
 * queue may hold thousands of connections that a probe would wait behind. After `isClosed()`,
 * the app can answer nothing: the process is not ready.
 */
export function appReadiness(app: FastifyInstance, isClosed: () => boolean): Readiness {
  return async () => {
    if (isClosed()) return toProbeAnswer(shuttingDown())
    const response = await app.inject({ method: 'GET', url: '/readyz' })
    const headers: Record<string, string> = {}
    for (const name of PROBE_HEADERS) {
      const value = response.headers[name]
      if (typeof value === 'string') headers[name] = value
    }
    return { status: response.statusCode, headers, body: response.body }
  }
}

const PROBE = 'petstore:probe'
const PROBE_ANSWER = 'petstore:probe-answer'
interface ProbeMessage {
  type: typeof PROBE
  id: number
}
interface ProbeAnswerMessage {
  type: typeof PROBE_ANSWER
  id: number
  answer: ProbeAnswer
}
const isMessage = <T extends { type: string }>(message: unknown, type: T['type']): message is T =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type

/** In a cluster worker: answers the primary's readiness probes with this worker's own. */
export function answerReadinessForPrimary(readiness: Readiness): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<ProbeMessage>(message, PROBE)) return
    void readiness().then((answer) => process.send?.({ type: PROBE_ANSWER, id: message.id, answer } satisfies ProbeAnswerMessage))
  })
}

/** How long the primary waits for its workers' readiness: within the listener's own READINESS_WAIT_MS. */
const WORKER_PROBE_MS = 400

/**
 * The readiness of the primary of `--workers N`, which serves no API request: it asks every
 * listening worker (`listening()`) and is ready when at least one of them is, since the shared port
 * then serves; else it gives a worker's refusal, or 503 `overloaded` when none answered within
 * WORKER_PROBE_MS, and 503 `unavailable` when no worker listens or the service is stopping.
 */
export function clusterReadiness(listening: () => readonly Worker[], isStopping: () => boolean): Readiness {
  let nextId = 0
  const waiting = new Map<number, (answer: ProbeAnswer) => void>()
  cluster.on('message', (_worker, message: unknown) => {
    if (isMessage<ProbeAnswerMessage>(message, PROBE_ANSWER)) waiting.get(message.id)?.(message.answer)
  })
  return async () => {
    if (isStopping()) return toProbeAnswer(shuttingDown())
    const workers = listening().filter((worker) => worker.isConnected())
    if (workers.length === 0) return toProbeAnswer(new ApiError('unavailable', 'No worker is serving yet.', { 'retry-after': '1' }))
    const id = nextId++
    const refusals: ProbeAnswer[] = []
    try {
      return await new Promise<ProbeAnswer>((resolve) => {
        const timer = setTimeout(
          () =>
            resolve(
              refusals[0] ??
                toProbeAnswer(new ApiError('overloaded', `No worker answered within ${WORKER_PROBE_MS} ms.`, { 'retry-after': '1' })),
            ),
          WORKER_PROBE_MS,
        )
        waiting.set(id, (answer) => {
          if (answer.status !== 200) refusals.push(answer)
          if (answer.status === 200 || refusals.length === workers.length) {
            clearTimeout(timer)
            resolve(answer)
          }
        })
        for (const worker of workers) worker.send({ type: PROBE, id } satisfies ProbeMessage)
      })
    } finally {
      waiting.delete(id)
    }
  }
}

/**
 * Serves `GET /metrics` on its own address, never on the API port: the public load balancer
 * forwards only the API port, so figures such as key ids cannot reach API clients, and the
 * endpoint needs no key. `GET /healthz` and `GET /readyz` too: an orchestrator's probes there never
 * wait behind the API's clients in the API port's accept queue, nor behind their requests in this
 * thread's event loop, since the listener runs in a worker thread of its own (src/process/probe-thread.ts).
 * This thread tells it that it is turning (liveness), and answers its readiness and scrapes.
 * Anything else there answers in the service's error shape. The listener has the API port's timeouts
 * and a cap of `maxConnections` (src/process/descriptors.ts); what it refuses is counted in `shedding`.
 */
export async function startMetricsListener(
  { port, host, chosen, hostVariable }: NonNullable<Config['metrics']>,
  source: MetricsSource,
  logger: FastifyBaseLogger,
  readiness: Readiness,
  { timeouts, maxConnections, shedding }: { timeouts: Config['timeouts']; maxConnections: number; shedding: Shedding },
): Promise<MetricsListener | undefined> {
  const heartbeat = newHeartbeat()
  const beat = () => Atomics.store(heartbeat, 0, process.hrtime.bigint())
  beat()
  const beating = setInterval(beat, HEARTBEAT_MS).unref()
  const thread = new Thread(new URL('./probe-thread.js', import.meta.url), {
    workerData: { port, host, heartbeat, timeouts: { ...timeouts }, maxConnections } satisfies ProbeListenerData,
  })
  const exited = new Promise<number>((resolve) => thread.once('exit', resolve))
  void exited.then(() => clearInterval(beating))
  thread.on('error', (error) => logger.error({ err: error }, 'the metrics listener failed'))

  const answer = (question: Question): Promise<ProbeAnswer> =>
    question === '/readyz'
      ? readiness().catch((error: unknown) => {
          logger.error({ err: error }, 'probe failed')
          return toProbeAnswer(new ApiError('internal_error', 'The probe could not be answered.'))
        })
      : source.scrape().then(
          (text) => ({ status: 200, headers: { 'content-type': source.contentType, 'cache-control': 'no-store' }, body: text }),
          (error: unknown) => {
            if (outOfDescriptors(error)) shedding.shortage('scrape', error)
            else logger.error({ err: error }, 'metrics scrape failed')
            return toProbeAnswer(new ApiError('internal_error', 'The metrics could not be collected.'))
          },
        )
  const started = await new Promise<AddressInfo | undefined>((resolve, reject) => {
    thread.on('message', (message: FromListener) => {
      switch (message.type) {
        case 'refused':
          shedding.refused('operations', message.reason, message.count)
          return
        case 'ask':
          void answer(message.question).then((answered) => thread.postMessage({ type: 'answer', id: message.id, answer: answered } satisfies ToListener))
          return
        case 'listening':
          resolve({ port: message.port, address: message.address, family: message.family })
          return
        case 'listen-failed':
          // A second instance on one host, started with only PORT changed, finds the default taken by
          // the first: it serves without metrics rather than not at all. A port the operator chose must work.
          if (message.code === 'EADDRINUSE' && !chosen) {
            logger.warn(
              `the default metrics port ${port} is in use on ${host} (another petstore on this host?): serving without /metrics; set METRICS_PORT to a free port, or to off`,
            )
            resolve(undefined)
          } else {
            reject(
              listenFailure('metrics', { host, port }, { host: hostVariable, port: 'METRICS_PORT' }, message) ??
                new Error(`the metrics listener cannot listen on ${host}:${port}: ${message.message}`),
            )
          }
      }
    })
    void exited.then((code) => reject(new Error(`the metrics listener stopped before it listened (exit code ${code})`)))
  }).catch(async (error: unknown) => {
    await thread.terminate()
    throw error
  })
  if (started === undefined) {
    await thread.terminate()
    return undefined
  }
  return {
    address: started,
    close: async () => {
      thread.postMessage({ type: 'close' } satisfies ToListener)
      await exited
    },
  }
}
