import cluster, { type Worker } from 'node:cluster'
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { AggregatorRegistry } from 'prom-client'
import type { Config } from './config.js'
import { ApiError } from './errors.js'
import { http } from './http/node-http.js'
import type { Metrics } from './http/metrics.js'

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

/** A probe path, answered on this listener as on the API port. */
type ProbePath = '/healthz' | '/readyz'
const PROBE_PATHS: ReadonlySet<string> = new Set<ProbePath>(['/healthz', '/readyz'])

/** An answer to a probe, as the API port would give it. */
interface ProbeAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** Answers `GET /healthz` and `GET /readyz` for this listener. */
export type Probes = (path: ProbePath) => Promise<ProbeAnswer>

// What a probe's answer may carry over; the rest (Connection, Content-Length…) belongs to its own exchange.
const PROBE_HEADERS = ['content-type', 'cache-control', 'retry-after', 'x-request-id'] as const

/**
 * The probes of this process, answered by the app's own routes (src/http/health.routes.ts, through
 * the load shedding like any request) without going through the API port: its accept queue may hold
 * thousands of connections that a probe would wait behind. After `isClosed()`, the app can answer
 * nothing: the process is still alive, and not ready.
 */
export function appProbes(app: FastifyInstance, isClosed: () => boolean): Probes {
  return async (path) => {
    if (isClosed()) {
      return path === '/healthz' ? LIVE : toProbeAnswer(new ApiError('unavailable', 'The service is shutting down.', { 'retry-after': '1' }))
    }
    const response = await app.inject({ method: 'GET', url: path })
    const headers: Record<string, string> = {}
    for (const name of PROBE_HEADERS) {
      const value = response.headers[name]
      if (typeof value === 'string') headers[name] = value
    }
    return { status: response.statusCode, headers, body: response.body }
  }
}

const LIVE: ProbeAnswer = { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{"status":"ok"}' }

function toProbeAnswer(error: ApiError): ProbeAnswer {
  return {
    status: error.status,
    headers: { ...error.headers, 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify(error.toBody()),
  }
}

const PROBE = 'petstore:probe'
const PROBE_ANSWER = 'petstore:probe-answer'
interface ProbeMessage {
  type: typeof PROBE
  id: number
  path: ProbePath
}
interface ProbeAnswerMessage {
  type: typeof PROBE_ANSWER
  id: number
  answer: ProbeAnswer
}
const isMessage = <T extends { type: string }>(message: unknown, type: T['type']): message is T =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type

/** In a cluster worker: answers the primary's readiness probes with this worker's own. */
export function answerProbesForPrimary(probes: Probes): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<ProbeMessage>(message, PROBE)) return
    void probes(message.path).then((answer) => process.send?.({ type: PROBE_ANSWER, id: message.id, answer } satisfies ProbeAnswerMessage))
  })
}

/** How long the primary waits for its workers' readiness: within an orchestrator's usual 1 s probe timeout. */
const WORKER_PROBE_MS = 500

/**
 * The probes of the primary of `--workers N`. Liveness is the primary's own: it replaces a worker
 * that dies, and a worker merely busy must not get the whole service restarted. Readiness asks
 * every listening worker (`listening()`) and is ready when at least one of them is, since the
 * shared port then serves; else it gives a worker's refusal, or 503 `overloaded` when none
 * answered within WORKER_PROBE_MS, and 503 `unavailable` when no worker listens or the service is stopping.
 */
export function clusterProbes(listening: () => readonly Worker[], isStopping: () => boolean): Probes {
  let nextId = 0
  const waiting = new Map<number, (answer: ProbeAnswer) => void>()
  cluster.on('message', (_worker, message: unknown) => {
    if (isMessage<ProbeAnswerMessage>(message, PROBE_ANSWER)) waiting.get(message.id)?.(message.answer)
  })
  return async (path) => {
    if (path === '/healthz') return LIVE
    if (isStopping()) return toProbeAnswer(new ApiError('unavailable', 'The service is shutting down.', { 'retry-after': '1' }))
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
        for (const worker of workers) worker.send({ type: PROBE, id, path } satisfies ProbeMessage)
      })
    } finally {
      waiting.delete(id)
    }
  }
}

function sendJsonError(response: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
  response
    .writeHead(error.status, {
      ...error.headers,
      ...headers,
      'cache-control': 'no-store',
      'content-type': 'application/json; charset=utf-8',
    })
    .end(JSON.stringify(error.toBody()))
}

/**
 * Serves `GET /metrics` on its own address, never on the API port: the public load balancer
 * forwards only the API port, so figures such as key ids cannot reach API clients, and the
 * endpoint needs no key. With `probes`, `GET /healthz` and `GET /readyz` too: an orchestrator's
 * probes there never wait behind the API's clients in the API port's accept queue. Anything else
 * there answers in the service's error shape.
 */
export async function startMetricsListener(
  { port, host, chosen }: NonNullable<Config['metrics']>,
  source: MetricsSource,
  logger: FastifyBaseLogger,
  probes?: Probes,
): Promise<MetricsListener | undefined> {
  const server = http.createServer({ requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000 }, (request, response) => {
    const path = (request.url ?? '/').split('?')[0] ?? '/'
    const probe = probes !== undefined && PROBE_PATHS.has(path)
    if (path !== '/metrics' && !probe) {
      sendJsonError(response, new ApiError('not_found', `No route ${request.method} ${path}.`))
      return
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      sendJsonError(response, new ApiError('method_not_allowed', `${request.method} is not allowed here; allowed: GET, HEAD.`), {
        allow: 'GET, HEAD',
      })
      return
    }
    if (probe) {
      probes(path as ProbePath).then(
        ({ status, headers, body }) => response.writeHead(status, headers).end(request.method === 'HEAD' ? undefined : body),
        (error: unknown) => {
          logger.error({ err: error }, 'probe failed')
          sendJsonError(response, new ApiError('internal_error', 'The probe could not be answered.'))
        },
      )
      return
    }
    source.scrape().then(
      (text) => {
        response.writeHead(200, { 'content-type': source.contentType, 'cache-control': 'no-store' }).end(text)
      },
      (error: unknown) => {
        logger.error({ err: error }, 'metrics scrape failed')
        sendJsonError(response, new ApiError('internal_error', 'The metrics could not be collected.'))
      },
    )
  })
  const listening = await new Promise<boolean>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => {
      // A second instance on one host, started with only PORT changed, finds the default taken by
      // the first: it serves without metrics rather than not at all. A port the operator chose must work.
      if (error.code === 'EADDRINUSE' && !chosen) {
        logger.warn(
          `the default metrics port ${port} is in use on ${host} (another petstore on this host?): serving without /metrics; set METRICS_PORT to a free port, or to off`,
        )
        resolve(false)
        return
      }
      reject(new Error(`the metrics listener (METRICS_PORT) cannot listen on ${host}:${port}: ${error.message}`, { cause: error }))
    }
    server.once('error', failed)
    server.listen(port, host, () => {
      server.off('error', failed)
      resolve(true)
    })
  })
  if (!listening) return undefined
  return {
    address: server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Prometheus keeps its connection alive between scrapes; an idle one must not hold shutdown.
        server.close((error) => (error === undefined ? resolve() : reject(error)))
        server.closeIdleConnections()
      }),
  }
}
