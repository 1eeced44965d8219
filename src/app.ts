import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify'
import type { Logger } from 'pino'
import { createAuthenticate } from './api-keys/api-keys.auth.js'
import { containsKey } from './shared/redaction.js'
import { createAuthFailuresCounter, createRateLimitedCounter } from './api-keys/api-keys.metrics.js'
import { registerRateLimits } from './api-keys/api-keys.rate-limit.js'
import { bearerAuthScheme } from './api-keys/api-keys.schemas.js'
import { createApiKeysService } from './api-keys/api-keys.service.js'
import { type Clock, systemClock } from './shared/clock.js'
import type { Config } from './config.js'
import { registerCors } from './http/cors.js'
import { registerDocsRoutes } from './http/docs.routes.js'
import { ApiError } from './errors.js'
import { collectRouteMethods, registerErrorHandling, sendError, toApiError } from './http/error-handler.js'
import { ErrorSchema } from './http/error-schema.js'
import { registerHealthRoutes } from './process/health.routes.js'
import { clientErrorHandler, createHttpServer, protocolChecks } from './http/http-protocol.js'
import { registerJsonBodyParser } from './http/json-body.js'
import { registerLoadShedding } from './http/load-shedding.js'
import { createMetrics, type Metrics, registerRequestMetrics } from './http/metrics.js'
import { registerOpenApi, registerOpenApiRoute } from './http/openapi.js'
import { echoRequestId, noChildLogger, registerRequestLog, requestIdOf } from './http/request-log.js'
import { decorateMatchedRoute } from './http/route.js'
import type { CertificatePair } from './http/tls.js'
import { createValidatorCompiler } from './http/validation.js'
import { createIdempotencyService } from './idempotency/idempotency.service.js'
import { NewPetSchema, PetSchema } from './pets/pets.schemas.js'
import { PETS_PATH, registerPetsRoutes } from './pets/pets.routes.js'
import { createPetsService } from './pets/pets.service.js'
import type { Storage } from './repositories.js'
import { createDeprecationHooks } from './deprecations/deprecations.hooks.js'
import { createDeprecatedCallsCounter } from './deprecations/deprecations.metrics.js'
import { createAppDeprecationRecorder, type DeprecationRecorder } from './deprecations/deprecations.recorder.js'
import { GET_PET_DEPRECATION } from './deprecations/deprecations.policy.js'
import { REQUEST_ID } from './http/header-names.js'

export interface AppDeps {
  config: Config
  storage: Storage
  clock?: Clock
  logger: Logger
  /** True once shutdown has begun: readiness fails (src/process/drain.ts closes the connections). */
  isDraining?: () => boolean
  /** Where requests, refusals and the pool are counted; absent: a registry of the app's own. */
  metrics?: Metrics
  /**
   * Counts getPet calls per key for `petstore deprecations`; its owner flushes it. Absent: one of
   * the app's own, flushed when the app closes (the server's case: storage closes after the app).
   */
  deprecationRecorder?: DeprecationRecorder
  /** With tracing on: the ids of the request's trace, for its log line. Absent: the line has none. */
  traceIds?: () => { traceId: string; spanId: string } | undefined
  /** The certificate and key of TLS_CERT_FILE and TLS_KEY_FILE: the API port serves HTTPS. Absent: plain HTTP. */
  tls?: CertificatePair
}

/** Builds the whole HTTP service; every part is registered here, explicitly. */
export async function buildApp({
  config,
  storage,
  clock = systemClock,
  logger,
  isDraining = () => false,
  // Nothing scrapes a registry made here, so it goes without the process metrics' timers.
  metrics = createMetrics({ processMetrics: false }),
  deprecationRecorder,
  traceIds,
  tls,
}: AppDeps): Promise<FastifyInstance> {
  const { trustProxy } = config
  // Typed as the logger every plugin and hook takes (pino's, seen as Fastify's own).
  const fastifyLogger: FastifyBaseLogger = logger
  const app = Fastify({
    loggerInstance: fastifyLogger,
    // One line per request is written by the onResponse hook below instead.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: noChildLogger,
    genReqId: requestIdOf(containsKey),
    requestIdHeader: false,
    return503OnClosing: false,
    clientErrorHandler,
    // Router errors (a malformed URL encoding) bypass the error handler; route them to it.
    // They also come before the onRequest hooks, so the request id is echoed here.
    frameworkErrors: (error, request, reply) => {
      reply.header(REQUEST_ID, request.id)
      sendError(reply, toApiError(error, () => undefined) ?? new ApiError('invalid_request', 'The request could not be routed.'))
    },
    routerOptions: { maxParamLength: 100 },
    trustProxy: typeof trustProxy === 'number' ? (_address: string, hop: number) => hop < trustProxy : trustProxy,
    serverFactory: (handler) => createHttpServer(handler, { timeouts: config.timeouts, tls, addresses: { log: config.logClientAddress, behindProxy: config.trustProxy !== false } }, logger),
  })

  const sharedSchemas = [ErrorSchema, NewPetSchema, PetSchema]
  for (const schema of sharedSchemas) app.addSchema(schema)
  app.setValidatorCompiler(createValidatorCompiler(sharedSchemas, containsKey))
  app.decorateRequest('apiKey', null)
  app.decorateRequest('errorCode', null)
  decorateMatchedRoute(app)

  // The hooks every request runs take a callback rather than return a promise: at thousands of
  // requests a second, a promise and a microtask per hook are a measurable share of the work.
  app.addHook('onRequest', echoRequestId)
  // Second only to the request id, which its refusals carry too.
  app.addHook('onRequest', protocolChecks)
  registerRequestLog(app, { clientAddress: config.logClientAddress, traceIds, logger })

  registerRequestMetrics(app, metrics)
  // Before the load shedding, the routes and collectRouteMethods (see registerCors): a preflight is
  // answered before anything could refuse it, and every later answer, a 503 overloaded too, is readable.
  await registerCors(app, config.corsOrigins)
  // Its onRequest hook comes after the request id and the protocol checks, and before the body
  // is parsed and any route's authentication, rate limit or handler runs: a shed request costs little.
  await registerLoadShedding(app, config.overload, metrics.countOverloaded)
  const answerOtherMethods = collectRouteMethods(app)
  registerJsonBodyParser(app)
  // Asked once per failed request, so it is where database outages are counted.
  registerErrorHandling(app, (error) => {
    if (!storage.isUnavailable(error)) return undefined
    if (storage.isOverloaded(error)) {
      metrics.countOverloaded('database-pool')
      return 'overloaded'
    }
    metrics.countDatabaseUnavailable()
    return 'unavailable'
  })
  const poolStats = storage.poolStats?.bind(storage)
  if (poolStats !== undefined) metrics.watchPool(poolStats)
  const replicaStats = storage.replicaStats?.bind(storage)
  if (replicaStats !== undefined) metrics.watchReplicas(replicaStats)
  await registerOpenApi(app, config, bearerAuthScheme)

  const limits = await registerRateLimits(app, config.rateLimits, logger, createRateLimitedCounter(metrics.registry), clock)
  const apiKeys = createApiKeysService({ apiKeys: storage.apiKeys, clock, environment: config.environment })
  const getPetDeprecation = createDeprecationHooks(
    { ...GET_PET_DEPRECATION, deprecatedAt: config.getPetDeprecatedAt, successor: `${config.publicBaseUrl}${PETS_PATH}` },
    {
      clock,
      recorder: deprecationRecorder ?? createAppDeprecationRecorder(app, storage.deprecations, clock),
      countCall: createDeprecatedCallsCounter(metrics.registry),
    },
  )
  registerPetsRoutes(app, {
    pets: createPetsService({ pets: storage.pets, clock }),
    idempotency: createIdempotencyService({ idempotency: storage.idempotency, clock }),
    authenticate: createAuthenticate(apiKeys, limits, createAuthFailuresCounter(metrics.registry)),
    getPetDeprecation,
    publicBaseUrl: config.publicBaseUrl,
    clock,
    registry: metrics.registry,
  })
  registerOpenApiRoute(app)
  registerDocsRoutes(app)
  registerHealthRoutes(app, storage, () => limits.storeStatus(), isDraining)
  answerOtherMethods()

  return app
}
