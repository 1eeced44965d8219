// The only module that loads OpenTelemetry, and only when an OTLP endpoint is configured: the entry
// point imports it before anything else, so that its instrumentations see fastify, pg and node:http
// load (docs/decisions/0019-tracing.md). Nothing else in src/ imports @opentelemetry/* at run time.
import { subscribe } from 'node:diagnostics_channel'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { getRPCMetadata, RPCType, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { registerInstrumentations } from '@opentelemetry/instrumentation'
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type Span,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'
import type { FastifyInstance } from 'fastify'
import { redactKeys } from '../shared/redaction.js'
import type { TracingConfig } from '../config.js'
import { traceSqliteRepository } from './tracing.sqlite.js'

/** The ids a log line carries to find its trace. */
interface TraceIds {
  traceId: string
  spanId: string
}

/** Tracing as the server uses it; without tracing there is none, and nothing of it is called. */
export interface Tracing {
  /** The trace and span of the request being handled, if it is traced. */
  currentIds: () => TraceIds | undefined
  /** A SQLite repository, which no instrumentation covers, with child spans around its calls (tracing.sqlite.ts). */
  readonly traceSqliteRepository: <R extends object>(repository: R, table: string) => R
  /** Exports the spans still queued, for at most `timeoutMs`, and stops. */
  shutdown(timeoutMs: number): Promise<void>
}

/** Spans wait here, at most this many, for the next export; past it new spans are dropped, never requests slowed. */
const MAX_QUEUED_SPANS = 2048
/** How long one export may take before it is abandoned (the exporter's own default is 10 s). */
const EXPORT_TIMEOUT_MS = 5_000

/**
 * Starts the tracer provider, the OTLP/HTTP exporter, the instrumentations of node:http and pg, and the
 * naming of server spans by Fastify's route. Must run before fastify, pg and node:http are imported. `metricsPort`: scrapes of the metrics
 * listener are not traced.
 */
export function startTracing(config: TracingConfig, { metricsPort }: { metricsPort?: number } = {}): Tracing {
  const exporterOptions = { url: config.url, headers: { ...config.headers }, timeoutMillis: EXPORT_TIMEOUT_MS }
  const exporter = config.protocol === 'http/json' ? new OtlpJsonExporter(exporterOptions) : new OtlpProtobufExporter(exporterOptions)
  const provider = new TracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName, 'process.pid': process.pid }),
    ),
    sampler: sampler(config),
    spanProcessors: [
      redactingProcessor,
      new BatchSpanProcessor({ exporter, maxQueueSize: MAX_QUEUED_SPANS, exportTimeoutMillis: EXPORT_TIMEOUT_MS }),
    ],
  })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)

  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // Captures no request or response header unless told (headersToSpanAttributes): no Authorization, no key.
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => metricsPort !== undefined && request.socket.localPort === metricsPort,
      }),
      // Statements without their parameters (a key's hash is one), and only within a traced request:
      // migrations and the periodic flush of getPet counts would each start a trace of their own.
      new PgInstrumentation({ enhancedDatabaseReporting: false, requireParentSpan: true }),
    ],
  })
  nameServerSpansByRoute()

  const tracer = provider.getTracer('petstore')
  return {
    currentIds: () => {
      const span = trace.getSpan(context.active())
      if (span === undefined) return undefined
      const { traceId, spanId } = span.spanContext()
      return { traceId, spanId }
    },
    traceSqliteRepository: (repository, table) => traceSqliteRepository(repository, table, tracer),
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs)
      })
      try {
        await Promise.race([provider.shutdown().catch(() => {}), late])
      } finally {
        clearTimeout(timer)
      }
    },
  }
}

/**
 * Tells the HTTP server span of each request its route template, from which instrumentation-http names
 * it (`GET /v1/pets/:petId`) and sets `http.route`. Fastify announces each instance it creates on this
 * channel, before any route or hook is added, so the app itself knows nothing of tracing. This is the
 * part of @fastify/otel the service used (its own span per request added nothing the server span lacks);
 * @fastify/otel held the SDK at 2 (docs/decisions/0019-tracing.md).
 */
function nameServerSpansByRoute(): void {
  subscribe('fastify.initialization', (message) => {
    const { fastify } = message as { fastify: FastifyInstance }
    fastify.addHook('onRequest', (request, _reply, done) => {
      const metadata = getRPCMetadata(context.active())
      if (metadata?.type === RPCType.HTTP && request.routeOptions.url !== undefined) metadata.route = request.routeOptions.url
      done()
    })
  })
}

function sampler({ sampler, samplerRatio }: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(samplerRatio)
  switch (sampler) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return ratio
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio })
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

/**
 * Before a span ends: a key pasted into a path or a query string would otherwise reach the collector
 * in `url.path`, `url.query` or a span name, so every string attribute and the name are redacted as log
 * lines are. A status message is dropped (the ERROR status stays): it is an error's free text, which
 * can quote a request body or a statement's values; the error itself is logged under the request's id.
 */
const redactingProcessor: SpanProcessor = {
  onStart() {},
  onEnding(span: Span) {
    for (const [name, value] of Object.entries(span.attributes)) {
      if (typeof value === 'string') {
        const redacted = redactKeys(value)
        if (redacted !== value) span.setAttribute(name, redacted)
      }
    }
    const name = redactKeys(span.name)
    if (name !== span.name) span.updateName(name)
    if (span.status.message !== undefined) span.setStatus({ code: span.status.code })
  },
  onEnd() {},
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
}
