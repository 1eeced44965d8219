import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { ApiError, type ErrorCode } from '../errors.js'
import { http } from './node-http.js'
import { BODY_LIMIT_BYTES } from '../shared/request-limits.js'
import { JSON_CONTENT_TYPE } from './header-names.js'

/** Fastify's own errors, by code, as the catalogue says them. */
const FRAMEWORK_ERRORS: Record<string, () => ApiError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () =>
    new ApiError('payload_too_large', `The request body is larger than ${BODY_LIMIT_BYTES} bytes.`),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new ApiError('unsupported_media_type', 'The request body must be sent as Content-Type: application/json.'),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () =>
    new ApiError('invalid_request', 'The Content-Length header does not match the body.'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new ApiError('invalid_request', 'The request body is empty: send a JSON object.'),
  FST_ERR_BAD_URL: () => new ApiError('invalid_request', 'The request URL is malformed.'),
  FST_ERR_ASYNC_CONSTRAINT: () => new ApiError('invalid_request', 'The request could not be routed.'),
}

/**
 * Whose a failure is, when the database refused to serve it: the database's (`unavailable`), or this
 * instance's load (`overloaded`, its pool's connections all busy); undefined when it is no refusal.
 */
export type DatabaseRefusal = (error: unknown) => 'unavailable' | 'overloaded' | undefined

/** The answers to a database's refusals, made once: a stuck database or a busy pool refuses many at a time. */
const REFUSED: Record<'unavailable' | 'overloaded', ApiError> = {
  unavailable: new ApiError('unavailable', 'The database is not answering; retry shortly.', { 'retry-after': '5' }),
  overloaded: new ApiError('overloaded', 'Every database connection of this instance is busy; retry after `Retry-After` seconds, or on another instance.', {
    'retry-after': '1',
  }),
}

export function toApiError(error: unknown, databaseRefusal: DatabaseRefusal): ApiError | undefined {
  if (error instanceof ApiError) return error
  const code = (error as Partial<FastifyError> | null)?.code
  const known = code === undefined ? undefined : FRAMEWORK_ERRORS[code]
  if (known !== undefined) return known()
  const refused = databaseRefusal(error)
  if (refused !== undefined) return REFUSED[refused]
  const status = (error as Partial<FastifyError> | null)?.statusCode
  if (status !== undefined && status >= 400 && status < 500) {
    return new ApiError('invalid_request', (error as Error).message)
  }
  return undefined
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  // For the request's log line: a 503 says whether the database or the load refused it.
  reply.request.errorCode = error.code
  return reply
    .code(error.status)
    .headers({ ...error.headers, 'cache-control': 'no-store', 'content-type': JSON_CONTENT_TYPE })
    .send(error.toBody())
}

/**
 * Every method Node's parser accepts, but CONNECT, which Node hands to the server's `connect` event
 * (http-protocol.ts). All of them are routed, so that a known path answers any of them with 405.
 */
const ROUTED_METHODS = http.METHODS.filter((method) => method !== 'CONNECT')

/**
 * One error shape for handler and hook errors, validation, the body parser and unknown routes
 * (404); collectRouteMethods does 405 and http-protocol.ts what Node answers itself. 5xx messages
 * never carry internals; the cause is logged.
 */
export function registerErrorHandling(app: FastifyInstance, databaseRefusal: DatabaseRefusal): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error, databaseRefusal)
    if (apiError !== undefined) {
      // Load is no fault: as the load shedding's, its refusals are counted and in the request log, one line each.
      if (apiError.status >= 500 && apiError.code !== 'overloaded') request.log.error({ reqId: request.id, err: error }, 'request failed')
      return sendError(reply, apiError)
    }
    request.log.error({ reqId: request.id, err: error }, 'unhandled error')
    return sendError(reply, new ApiError('internal_error', `Internal error; quote request id ${request.id} when reporting it.`))
  })

  app.setNotFoundHandler((request, reply) => {
    // HEAD's Content-Length is that of GET's answer (RFC 9110 §9.3.2), so its unsent message is GET's.
    const method = request.method === 'HEAD' ? 'GET' : request.method
    return sendError(reply, new ApiError('not_found', `No route ${method} ${request.url.split('?')[0]}.`))
  })
}

/**
 * Starts collecting the methods of every path as routes are added. Call it before any route;
 * call the function it returns after the last one: it answers every other method of each path
 * with 405 and an `Allow` header, as soon as the request is routed, before its body is read.
 */
export function collectRouteMethods(app: FastifyInstance): () => void {
  for (const method of ROUTED_METHODS) {
    if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true })
  }
  const methodsByPath = new Map<string, Set<string>>()
  watchServedRoutes(app, (methods, url) => {
    const known = methodsByPath.get(url) ?? new Set<string>()
    for (const method of methods) known.add(method)
    methodsByPath.set(url, known)
  })
  return () => {
    for (const [url, methods] of methodsByPath) {
      const allow = ROUTED_METHODS.filter((method) => methods.has(method)).join(', ')
      const others = ROUTED_METHODS.filter((method) => !methods.has(method))
      const refuse = async (request: FastifyRequest, reply: FastifyReply) =>
        sendError(reply, new ApiError('method_not_allowed', `${request.method} is not allowed here; allowed: ${allow}.`, { allow }))
      // Answered from onRequest: the body parser would otherwise answer 413 or 415 first.
      app.route({ method: others, url, schema: { hide: true }, config: { methodNotAllowed: true }, onRequest: refuse, handler: refuse })
    }
  }
}

/**
 * Calls `served` with the methods and the path of each route added from now on that serves them: every
 * route but the 405 ones collectRouteMethods adds, which answer their methods only to refuse them.
 */
export function watchServedRoutes(app: FastifyInstance, served: (methods: readonly string[], url: string) => void): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.methodNotAllowed !== true) served([route.method].flat(), route.url)
  })
}

declare module 'fastify' {
  interface FastifyContextConfig {
    methodNotAllowed?: boolean
  }
  interface FastifyRequest {
    /** The code of the error answered, for the log line; null while none was. */
    errorCode: ErrorCode | null
  }
}
