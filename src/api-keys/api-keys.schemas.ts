import { type TSchema, Type } from '@sinclair/typebox'
import { alwaysSent, errorResponse } from '../http/error-schema.js'
import type { Scope } from './api-keys.scopes.js'

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
