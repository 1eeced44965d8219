import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, RouteOptions } from 'fastify'
import { ApiError, type ErrorBody } from '../errors.js'
import { BODY_LIMIT_BYTES } from './json-body.js'

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

export function toApiError(error: unknown, isUnavailable: (error: unknown) => boolean): ApiError | undefined {
  if (error instanceof ApiError) return error
  const code = (error as Partial<FastifyError> | null)?.code
  const known = code === undefined ? undefined : FRAMEWORK_ERRORS[code]
  if (known !== undefined) return known()
  if (isUnavailable(error)) {
    return new ApiError('unavailable', 'The database is not answering; retry shortly.', { 'retry-after': '5' })
  }
  const status = (error as Partial<FastifyError> | null)?.statusCode
  if (status !== undefined && status >= 400 && status < 500) {
    return new ApiError('invalid_request', (error as Error).message)
  }
  return undefined
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply
    .code(error.status)
    .headers({ ...error.headers, 'cache-control': 'no-store', 'content-type': 'application/json; charset=utf-8' })
    .send(error.toBody())
}

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const

/**
 * One error shape for handler and hook errors, validation, the body parser and unknown routes
 * (404); collectRouteMethods does 405 and clientErrorHandler malformed HTTP. 5xx messages never
 * carry internals; the cause is logged.
 */
export function registerErrorHandling(app: FastifyInstance, isUnavailable: (error: unknown) => boolean): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error, isUnavailable)
    if (apiError !== undefined) {
      if (apiError.status >= 500) request.log.error({ err: error }, 'request failed')
      return sendError(reply, apiError)
    }
    request.log.error({ err: error }, 'unhandled error')
    return sendError(reply, new ApiError('internal_error', `Internal error; quote request id ${request.id} when reporting it.`))
  })

  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`)),
  )
}

/**
 * Starts collecting the methods of every path as routes are added. Call it before any route;
 * call the function it returns after the last one: it answers the other methods of each path
 * with 405 and an `Allow` header.
 */
export function collectRouteMethods(app: FastifyInstance): () => void {
  const methodsByPath = new Map<string, Set<string>>()
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.methodNotAllowed === true) return
    const methods = methodsByPath.get(route.url) ?? new Set<string>()
    for (const method of [route.method].flat()) methods.add(method)
    methodsByPath.set(route.url, methods)
  })
  return () => {
    for (const [url, methods] of methodsByPath) {
      const allow = ALL_METHODS.filter((method) => methods.has(method)).join(', ')
      const others = ALL_METHODS.filter((method) => !methods.has(method))
      if (others.length === 0) continue
      app.route({
        method: others,
        url,
        schema: { hide: true },
        config: { methodNotAllowed: true },
        handler: (request, reply) =>
          sendError(
            reply,
            new ApiError('method_not_allowed', `${request.method} is not allowed here; allowed: ${allow}.`, { allow }),
          ),
      })
    }
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    methodNotAllowed?: boolean
  }
}

const CLIENT_ERRORS: Record<string, ApiError> = {
  HPE_HEADER_OVERFLOW: new ApiError('request_header_fields_too_large', 'The request headers are too large.'),
  ERR_HTTP_REQUEST_TIMEOUT: new ApiError('request_timeout', 'The request took too long to arrive.'),
}

/** Answers HTTP that Node could not parse, before Fastify sees a request, in the same error shape. */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const apiError =
    CLIENT_ERRORS[error.code ?? ''] ?? new ApiError('invalid_request', 'The request is not well-formed HTTP.')
  const body: ErrorBody = apiError.toBody()
  const text = JSON.stringify(body)
  socket.end(
    `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(text)}\r\n` +
      'Cache-Control: no-store\r\nConnection: close\r\n\r\n' +
      text,
  )
}
