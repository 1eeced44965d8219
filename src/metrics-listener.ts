import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
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
 * endpoint needs no key. Anything else there answers in the service's error shape.
 */
export async function startMetricsListener(
  { port, host, chosen }: NonNullable<Config['metrics']>,
  source: MetricsSource,
  logger: FastifyBaseLogger,
): Promise<MetricsListener | undefined> {
  const server = http.createServer({ requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000 }, (request, response) => {
    const path = (request.url ?? '/').split('?')[0]
    if (path !== '/metrics') {
      sendJsonError(response, new ApiError('not_found', `No route ${request.method} ${path}.`))
      return
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      sendJsonError(response, new ApiError('method_not_allowed', `${request.method} is not allowed here; allowed: GET, HEAD.`), {
        allow: 'GET, HEAD',
      })
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
