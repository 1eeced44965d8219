import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { writeInt64BoundsExactly } from './schema-types.js'

export const OPENAPI_PATH = '/v1/openapi.json'

const DESCRIPTION = `A small pet store: list, add and retrieve animals.

Every operation needs an API key sent as \`Authorization: Bearer <key>\`. Every error response has
the body \`{ code, message, status }\`; the \`code\` values are listed on the Error schema.
Integers (\`id\`, \`categoryId\`) are exact across the whole int64 range: parse them losslessly.`

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
            description: 'An API key: `ps_live_…` in production, `ps_test_…` in staging.',
          },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    // Runs once on the finished document, which @fastify/swagger then caches.
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) throw new Error('an OpenAPI 3 document was expected')
      const document = documentObject.openapiObject
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
