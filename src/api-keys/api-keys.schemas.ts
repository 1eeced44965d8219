import { type TSchema, Type } from 'typebox'
import { alwaysSent, errorResponse } from '../http/error-schema.js'
import { KEY_PREFIX } from './api-keys.format.js'
import { type Scope, scopesAndOperations } from './api-keys.scopes.js'

/** The document's `bearerAuth` security scheme: what a key looks like, and what its scopes allow. */
export const bearerAuthScheme = {
  type: 'http',
  scheme: 'bearer',
  description:
    `An API key: \`${KEY_PREFIX.production}…\` in production, \`${KEY_PREFIX.staging}…\` in staging. Each key holds scopes, listed in each ` +
    `operation's security requirement: ${scopesAndOperations((scope) => `\`${scope}\``).join(' and ')}. A key ` +
    'without the scope an operation needs gets 403 `forbidden`.',
} as const

/** After the key authenticated and was counted: the rate-limit headers come too. */
export const forbiddenResponse = (scope: Scope, headers: Record<string, TSchema> = {}): TSchema =>
  errorResponse(`The API key is valid but does not have the \`${scope}\` scope (\`forbidden\`).`, {
    ...headers,
    ...alwaysSent({
      'WWW-Authenticate': Type.Literal(`Bearer realm="petstore", error="insufficient_scope", scope="${scope}"`, {
        description: 'Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks.',
      }),
    }),
  })
