import { type TSchema, Type } from 'typebox'
import { CONFIG_VARIABLES } from '../config.js'
import { ERROR_CODES, ERROR_DESCRIPTIONS, ERROR_STATUS } from '../errors.js'
import { BODY_LIMIT_BYTES } from './json-body.js'
import { RefTo, StringEnum } from './schema-types.js'

/** Node's default `maxHeaderSize`, which the service keeps: a request line and header block past it is answered 431. */
export const HEADER_BLOCK_MAX_BYTES = 16 * 1024

/**
 * The longest message an error can have. A message quotes at most one part of the request (a path, a
 * header's name, the names of parameters or properties), which came within the header block or the body;
 * the service's own words around it, up to five problems of a validation, stay far below the 1 KiB added.
 */
export const ERROR_MESSAGE_MAX_LENGTH = Math.max(HEADER_BLOCK_MAX_BYTES, BODY_LIMIT_BYTES) + 1024

const STATUSES = Object.values(ERROR_STATUS)

export const ErrorSchema = Type.Object(
  {
    code: StringEnum(ERROR_CODES, {
      description: `Machine-readable error code:\n\n${ERROR_CODES.map((code) => `- \`${code}\`: ${ERROR_DESCRIPTIONS[code]}`).join('\n')}`,
    }),
    message: Type.String({
      minLength: 1,
      maxLength: ERROR_MESSAGE_MAX_LENGTH,
      pattern: '\\S',
      description: 'Human-readable description of what went wrong. It may quote a part of the request, API keys redacted.',
    }),
    status: Type.Integer({
      format: 'int32',
      minimum: Math.min(...STATUSES),
      maximum: Math.max(...STATUSES),
      description: 'The HTTP status code of the response.',
    }),
  },
  { $id: 'Error', additionalProperties: false, description: 'The body of every error response.' },
)

type Headers = Record<string, TSchema>

/**
 * The keyword that marks a header's schema as always sent on the responses that list it that way;
 * openapi.ts turns it into the header's `required: true`. @fastify/swagger has no word for it.
 */
export const ALWAYS_SENT = 'x-always-sent'

/**
 * `headers` as a response lists those it always carries, whatever led to it: clients and contract
 * testers may count on them. A header sent on some answers of a status only is listed without it.
 */
export function alwaysSent<H extends Headers>(headers: H): H {
  const marked: Headers = {}
  for (const [name, schema] of Object.entries(headers)) marked[name] = { ...schema, [ALWAYS_SENT]: true }
  return marked as H
}

/** On every error, whichever layer answers it (sendError, or http-protocol.ts before Fastify has a request). */
export const ERROR_HEADERS = alwaysSent({
  'Cache-Control': Type.Literal('no-store', { description: '`no-store`: an error is never kept by any cache.' }),
})

/**
 * The longest value of either rate-limit header: the longer policy name with a quota (or what is left of
 * it) at its greatest, RATE_LIMIT_PER_KEY's and RATE_LIMIT_FAILED_AUTH_PER_IP's most, in a one-minute window.
 */
const RATE_LIMIT_VALUE_MAX_LENGTH = `"failed-auth";q=${Math.max(CONFIG_VARIABLES.RATE_LIMIT_PER_KEY.max, CONFIG_VARIABLES.RATE_LIMIT_FAILED_AUTH_PER_IP.max)};w=60`.length

/** The IETF draft rate-limit headers (draft-ietf-httpapi-ratelimit-headers). */
export const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': Type.String({
    maxLength: RATE_LIMIT_VALUE_MAX_LENGTH,
    pattern: '^"(per-key|failed-auth)";q=[0-9]+;w=[0-9]+$',
    description:
      'The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every ' +
      'answer to a request whose API key authenticated, success or error, while a per-key limit is configured; ' +
      'with `"failed-auth"` on a 429 for too many failed authentications.',
  }),
  RateLimit: Type.String({
    maxLength: RATE_LIMIT_VALUE_MAX_LENGTH,
    pattern: '^"(per-key|failed-auth)";r=[0-9]+;t=[0-9]+$',
    description:
      'What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with ' +
      '`RateLimit-Policy`, unless the store of the counters is unavailable.',
  }),
}

/** A response that carries the Error body, with what it means for this operation. */
function errorBody(description: string, headers: Headers): TSchema {
  return RefTo(ErrorSchema, { description, headers: { ...headers, ...ERROR_HEADERS } })
}

/**
 * An error an operation answers once the key has authenticated, as all but 401 are: the request was
 * counted, so the response says where the key stands (RATE_LIMIT_HEADERS). They are not required:
 * some of these statuses also come before a key is known (a 503 while the database cannot check it).
 */
export function errorResponse(description: string, headers: Headers = {}): TSchema {
  return errorBody(description, { ...headers, ...RATE_LIMIT_HEADERS })
}

const WWW_AUTHENTICATE_HEADER = alwaysSent({
  'WWW-Authenticate': Type.String({
    maxLength: 'Bearer realm="petstore", error="invalid_token"'.length,
    pattern: '^Bearer realm="petstore"(, error="invalid_token")?$',
    description: 'Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid.',
  }),
})

/**
 * The longest wait the service asks for is the rest of a rate-limit window, a minute (the limits count per
 * minute); a 503 asks for a second or a few.
 */
const RETRY_AFTER_MAX_S = 60

const RETRY_AFTER_HEADER = alwaysSent({
  'Retry-After': Type.Integer({ format: 'int32', minimum: 1, maximum: RETRY_AFTER_MAX_S, description: 'Seconds to wait before retrying.' }),
})

/** No key was counted, so no RateLimit headers. `headers`: those the operation adds to every answer. */
export const unauthorizedResponse = (headers: Headers = {}): TSchema =>
  errorBody('The API key is missing or not valid (`unauthorized`).', { ...headers, ...WWW_AUTHENTICATE_HEADER })

export const internalErrorResponse = (headers: Headers = {}): TSchema =>
  errorResponse('A fault in the service (`internal_error`).', headers)

export const unavailableResponse = (headers: Headers = {}): TSchema =>
  errorResponse(
    'The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`).',
    { ...headers, ...RETRY_AFTER_HEADER },
  )

export const rateLimitedResponse = (headers: Headers = {}): TSchema =>
  errorResponse(
    'Too many requests for this API key, or too many failed authentications from this address (`rate_limited`).',
    { ...headers, ...RETRY_AFTER_HEADER },
  )
