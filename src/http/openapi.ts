import swagger from '@fastify/swagger'
import { type TSchema, Type } from 'typebox'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { ERROR_STATUS } from '../errors.js'
import { ALWAYS_SENT, ERROR_HEADERS, ErrorSchema, HEADER_BLOCK_MAX_BYTES, alwaysSent } from './error-schema.js'
import { MAX_HEADER_LINES } from './http-protocol.js'
import { http } from './node-http.js'
import { idOfSchema } from './schema-types.js'
import { writeInt64BoundsExactly } from '../shared/int64.js'

export const OPENAPI_PATH = '/v1/openapi.json'

const DESCRIPTION = `A small pet store: list, add and retrieve animals.

Every operation needs an API key sent as \`Authorization: Bearer <key>\`. Every error response has
the body \`{ code, message, status }\`; the \`code\` values are listed on the Error schema.
Integers (\`id\`, \`categoryId\`) are exact across the whole int64 range: parse them losslessly.`

type Headers = Record<string, TSchema>

/** On every response, from the first hook of every request (app.ts) or with the answers given before it. */
const REQUEST_ID_HEADER = alwaysSent({
  'X-Request-Id': Type.String({
    minLength: 1,
    maxLength: 128,
    pattern: '^[A-Za-z0-9._:-]+$',
    description:
      "The id of this request in the service's logs: the request's own `X-Request-Id` when it is safe to echo, " +
      'otherwise a new UUID. Quote it when reporting a problem.',
  }),
})

interface DocumentHeader {
  $ref?: string
  description?: string
  required?: boolean
  schema?: Record<string, unknown>
}

interface DocumentResponse {
  $ref?: string
  description?: string
  headers?: Record<string, DocumentHeader>
  content?: Record<string, { schema: Record<string, unknown> }>
}

interface DocumentOperation {
  operationId?: string
  summary?: string
  description?: string
  responses?: Record<string, DocumentResponse>
}

/** Header schemas as the document holds them: as @fastify/swagger writes those of the routes. */
function documentHeaders(headers: Headers): Record<string, DocumentHeader> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, schema]) => {
      const { description, ...rest } = JSON.parse(JSON.stringify(schema)) as { description?: string } & Record<string, unknown>
      return [name, { description, schema: rest }]
    }),
  )
}

/** An error answer that every operation shares, given before the request reaches its route. */
function sharedErrorResponse(description: string, headers: Headers = {}) {
  return {
    description,
    headers: documentHeaders({ ...headers, ...ERROR_HEADERS }),
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${idOfSchema(ErrorSchema) ?? ''}` } } },
  }
}

/**
 * Answers that do not depend on the operation, each one named response that every operation refers
 * to: 405 for the methods a path lacks (with its path's `Allow`), and what the HTTP layer answers
 * before routing (http-protocol.ts), so a request to any operation can get it. Not 501: a method HTTP
 * does not define is no operation's method, and the Error code catalogue lists it.
 */
const SHARED_STATUS = {
  MethodNotAllowed: ERROR_STATUS.method_not_allowed,
  RequestTimeout: ERROR_STATUS.request_timeout,
  ExpectationFailed: ERROR_STATUS.expectation_failed,
  RequestHeaderFieldsTooLarge: ERROR_STATUS.request_header_fields_too_large,
} as const

/** The SHARED_STATUS responses, made afresh for each document: the finishing touches change them in place. */
const sharedResponses = () => ({
  MethodNotAllowed: sharedErrorResponse(
    'The path exists but not with this method (`method_not_allowed`), whatever else is wrong with the request: ' +
      'routing comes before authentication. `Allow` lists the methods the path has.',
    alwaysSent({
      Allow: Type.String({
        // Every method Node routes, the longest Allow a path could have; CONNECT's is empty.
        maxLength: http.METHODS.join(', ').length,
        pattern: '^([A-Z-]+(, [A-Z-]+)*)?$',
        description: 'The methods of the path: those of its operations, and `HEAD` wherever there is `GET`, e.g. `GET, HEAD, POST`.',
      }),
    }),
  ),
  RequestTimeout: sharedErrorResponse(
    'The headers did not arrive within `HEADERS_TIMEOUT_MS`, or the whole request within `REQUEST_TIMEOUT_MS` ' +
      '(`request_timeout`). The connection is closed.',
  ),
  ExpectationFailed: sharedErrorResponse(
    '`Expect` asks for something other than `100-continue` (`expectation_failed`). Answered before anything else; the connection is closed.',
  ),
  RequestHeaderFieldsTooLarge: sharedErrorResponse(
    `The header block is over ${HEADER_BLOCK_MAX_BYTES / 1024} KiB, or has more than ${MAX_HEADER_LINES} lines (\`request_header_fields_too_large\`). ` +
      'Answered before anything else.',
  ),
}) satisfies Record<keyof typeof SHARED_STATUS, DocumentResponse>

/** `required: true` for each header marked as always sent: @fastify/swagger copies header schemas as they are. */
function markRequired(headers: Record<string, DocumentHeader>): void {
  for (const header of Object.values(headers)) {
    if (header.schema === undefined) continue
    const { [ALWAYS_SENT]: always, ...schema } = header.schema
    if (always !== true) continue
    header.schema = schema
    header.required = true
  }
}

/** Gives every response the headers every answer carries, as references to their one definition. */
function addHeadersOfEveryAnswer(responses: Iterable<DocumentResponse>): void {
  const everywhere = Object.fromEntries(Object.keys(REQUEST_ID_HEADER).map((name) => [name, { $ref: `#/components/headers/${name}` }]))
  for (const response of responses) {
    if (response.$ref !== undefined) continue
    response.headers = { ...everywhere, ...response.headers }
    markRequired(response.headers)
  }
}

/**
 * Fastify serves HEAD from each GET route, and @fastify/swagger (`exposeHeadRoutes`) lists it as a copy of
 * the GET operation named `<operationId>-head`. It becomes `head<OperationId>`, a name a generated client
 * can carry, without the bodies of GET's own responses: a HEAD answer has none (RFC 9110 §9.3.2).
 */
function describeHeadOperations(paths: Record<string, Record<string, DocumentOperation>>): void {
  for (const operations of Object.values(paths)) {
    const head = operations.head
    const getOperationId = operations.get?.operationId
    if (head === undefined || getOperationId === undefined) continue
    head.operationId = `head${getOperationId.charAt(0).toUpperCase()}${getOperationId.slice(1)}`
    head.summary = `${operations.get?.summary ?? getOperationId}: headers only`
    head.description = `As \`${getOperationId}\`, with the same status and headers, without the body.`
    for (const response of Object.values(head.responses ?? {})) delete response.content
  }
}

/**
 * Every other method of a known path answers 405: each operation refers to the SHARED_STATUS
 * responses, its 405 with its path's `Allow`.
 */
function describeOtherMethods(paths: Record<string, Record<string, DocumentOperation>>): void {
  for (const [path, operations] of Object.entries(paths)) {
    // In the order of Node's list of methods, as collectRouteMethods writes `Allow`.
    const methods = http.METHODS.filter((method) => Object.hasOwn(operations, method.toLowerCase()))
    const allow = methods.join(', ')
    for (const operation of Object.values(operations)) {
      const shared: Record<string, DocumentResponse> = {}
      for (const [name, status] of Object.entries(SHARED_STATUS)) shared[status] = { $ref: `#/components/responses/${name}` }
      shared[ERROR_STATUS.method_not_allowed] = {
        $ref: `#/components/responses/MethodNotAllowed`,
        description: `Any method other than ${methods.join(', ').replace(/, (\w+)$/, ' and $1')} on \`${path}\` is answered 405 \`method_not_allowed\` with \`Allow: ${allow}\`.`,
      }
      const responses = { ...operation.responses, ...shared }
      // In the order of their statuses, as a reader looks them up.
      operation.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)))
    }
  }
}

/**
 * Replaces each `{"allOf": [X]}` with X. Named wraps a described reference in `allOf` so that
 * @fastify/swagger keeps the description (it drops whatever stands beside a `$ref`); by now the
 * description has moved to the parameter, and the lone `allOf` would only puzzle linters.
 */
function unwrapLoneAllOf(node: unknown): unknown {
  if (typeof node !== 'object' || node === null) return node
  const object = node as Record<string, unknown>
  const { allOf } = object
  if (Array.isArray(allOf) && allOf.length === 1 && Object.keys(object).length === 1) return unwrapLoneAllOf(allOf[0])
  for (const [key, value] of Object.entries(object)) object[key] = unwrapLoneAllOf(value)
  return object
}

/** The security scheme every operation names: the API key feature says what a key is and what it allows. */
interface BearerAuthScheme {
  type: 'http'
  scheme: 'bearer'
  description: string
}

/**
 * Registers the OpenAPI 3.1 generator. It must come before the routes: it collects them as they
 * are added, from the same schemas that validate and serialise.
 */
export async function registerOpenApi(app: FastifyInstance, config: Config, bearerAuth: BearerAuthScheme): Promise<void> {
  const servers = (['production', 'staging'] as const).flatMap((environment) => {
    const origin = config.servers[environment]
    // Both are the public API, for any client (OWASP API9: an inventory says whom each server is for).
    return origin === undefined ? [] : [{ url: `${origin}/v1`, description: environment, 'x-internal': false }]
  })
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Pet Store API',
        version: '1.0.0',
        description: DESCRIPTION,
        license: { name: 'UNLICENSED', identifier: 'LicenseRef-Proprietary' },
      },
      servers,
      tags: [{ name: 'pets', description: 'Animals in the store.' }],
      components: {
        securitySchemes: { bearerAuth },
        headers: documentHeaders(REQUEST_ID_HEADER),
        responses: sharedResponses(),
      },
      security: [{ bearerAuth: [] }],
    },
    // Runs once on the finished document, which @fastify/swagger then caches.
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) throw new Error('an OpenAPI 3 document was expected')
      const document = documentObject.openapiObject
      const paths = document.paths as Record<string, Record<string, DocumentOperation>>
      describeHeadOperations(paths)
      describeOtherMethods(paths)
      const operations = Object.values(paths).flatMap((operations) => Object.values(operations))
      markRequired((document.components?.headers ?? {}) as Record<string, DocumentHeader>)
      addHeadersOfEveryAnswer([
        ...operations.flatMap((operation) => Object.values(operation.responses ?? {})),
        ...Object.values((document.components?.responses ?? {}) as Record<string, DocumentResponse>),
      ])
      unwrapLoneAllOf(document)
      writeInt64BoundsExactly(document)
      return document
    },
    exposeHeadRoutes: true,
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  })
}

/** Serves the document; no authentication, so that tools can read it before holding a key. */
export function registerOpenApiRoute(app: FastifyInstance): void {
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger())
}
