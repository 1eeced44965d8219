import { type TSchema, Type } from '@sinclair/typebox'
import { ERROR_CODES, ERROR_DESCRIPTIONS } from '../errors.js'
import { StringEnum } from './schema-types.js'

export const ErrorSchema = Type.Object(
  {
    code: StringEnum(ERROR_CODES, {
      description: `Machine-readable error code:\n\n${ERROR_CODES.map((code) => `- \`${code}\`: ${ERROR_DESCRIPTIONS[code]}`).join('\n')}`,
    }),
    message: Type.String({ description: 'Human-readable description of what went wrong.' }),
    status: Type.Integer({ description: 'The HTTP status code of the response.' }),
  },
  { $id: 'Error', additionalProperties: false, description: 'The body of every error response.' },
)

/** A response that carries the Error body, with what it means for this operation. */
export function errorResponse(description: string, headers?: Record<string, TSchema>): TSchema {
  return Type.Ref(ErrorSchema, { description, ...(headers === undefined ? {} : { headers }) })
}

export const WWW_AUTHENTICATE_HEADER = {
  'WWW-Authenticate': Type.String({
    description: 'Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid.',
  }),
}

export const unauthorizedResponse = errorResponse(
  'The API key is missing or not valid (`unauthorized`).',
  WWW_AUTHENTICATE_HEADER,
)
export const internalErrorResponse = errorResponse('A fault in the service (`internal_error`).')
export const unavailableResponse = errorResponse('The database is not answering (`unavailable`).')

/** The IETF draft rate-limit headers (draft-ietf-httpapi-ratelimit-headers) on authenticated responses. */
export const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': Type.String({
    description: 'The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s).',
  }),
  RateLimit: Type.String({
    description: 'What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s).',
  }),
}

export const rateLimitedResponse = errorResponse(
  'Too many requests for this API key, or too many failed authentications from this address (`rate_limited`).',
  {
    'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying.' }),
    ...RATE_LIMIT_HEADERS,
  },
)
