import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { ErrorSchema } from './error-schema.js'
import { writeInt64BoundsExactly } from '../int64.js'

export const OPENAPI_PATH = '/v1/openapi.json'

const DESCRIPTION = `A small pet store: list, add and retrieve animals.

Every operation needs an API key sent as \`Authorization: Bearer <key>\`. Every error response has
the body \`{ code, message, status }\`; the \`code\` values are listed on the Error schema.
Integers (\`id\`, \`categoryId\`) are exact across the whole int64 range: parse them losslessly.`

/** The reusable response every operation refers to for 405: a path answers the methods it lacks with it. */
const METHOD_NOT_ALLOWED = 'MethodNotAllowed'

const methodNotAllowedResponse = {
  description:
    'The path exists but not with this method (`method_not_allowed`), whatever else is wrong with the request: ' +
    'routing comes before authentication. `Allow` lists the methods the path has.',
  headers: {
    Allow: {
      required: true,
      description: 'The methods of the path: those of its operations, and `HEAD` wherever there is `GET`, e.g. `GET, HEAD, POST`.',
      schema: { type: 'string' as const },
    },
  },
  content: { 'application/json': { schema: { $ref: `#/components/schemas/${ErrorSchema.$id}` } } },
}

interface DocumentOperation {
  description?: string
  responses?: Record<string, unknown>
}

/**
 * What the operations alone cannot show: every GET also answers HEAD (Fastify serves it from the
 * GET route), and every other method of a known path answers 405. HEAD is said in words rather
 * than as `head` operations, which would give every generated client a method per path that no
 * one needs; 405 is one named response, referred to by each operation with its path's `Allow`.
 */
function describeOtherMethods(paths: Record<string, Record<string, DocumentOperation>>): void {
  for (const [path, operations] of Object.entries(paths)) {
    const methods = Object.keys(operations).flatMap((method) => (method === 'get' ? ['GET', 'HEAD'] : [method.toUpperCase()]))
    const allow = methods.join(', ')
    for (const [method, operation] of Object.entries(operations)) {
      if (method === 'get') {
        operation.description = `${operation.description ?? ''}\n\nAlso answers \`HEAD\`: as \`GET\`, with the same status and headers, without the body.`.trimStart()
      }
      operation.responses = {
        ...operation.responses,
        405: {
          $ref: `#/components/responses/${METHOD_NOT_ALLOWED}`,
          description: `Any method other than ${methods.join(', ').replace(/, (\w+)$/, ' and $1')} on \`${path}\` is answered 405 \`method_not_allowed\` with \`Allow: ${allow}\`.`,
        },
      }
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

/**
 * Registers the OpenAPI 3.1 generator. It must come before the routes: it collects them as they
 * are added, from the same schemas that validate and serialise.
 */
export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  const servers = (['production', 'staging'] as const).flatMap((environment) => {
    const origin = config.servers[environment]
    return origin === undefined ? [] : [{ url: `${origin}/v1`, description: environment }]
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
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key: `ps_live_…` in production, `ps_test_…` in staging. Each key holds scopes, listed in each ' +
              "operation's security requirement: `pets:read` (listPets, getPet) and `pets:write` (createPet). A key " +
              'without the scope an operation needs gets 403 `forbidden`.',
          },
        },
        responses: { [METHOD_NOT_ALLOWED]: methodNotAllowedResponse },
      },
      security: [{ bearerAuth: [] }],
    },
    // Runs once on the finished document, which @fastify/swagger then caches.
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) throw new Error('an OpenAPI 3 document was expected')
      const document = documentObject.openapiObject
      describeOtherMethods(document.paths as Record<string, Record<string, DocumentOperation>>)
      unwrapLoneAllOf(document)
      writeInt64BoundsExactly(document)
      return document
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  })
}

/** Serves the document; no authentication, so that tools can read it before holding a key. */
export function registerOpenApiRoute(app: FastifyInstance): void {
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger())
}
