import { redactKeys } from './shared/redaction.js'

/**
 * The one catalogue of error codes. Every failure of every layer (router, body parser, auth,
 * validation, storage, bugs) leaves the service as `{ code, message, status }` with one of these.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_key_in_use: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unsupported_content_encoding: 415,
  expectation_failed: 417,
  idempotency_key_reused: 422,
  rate_limited: 429,
  request_header_fields_too_large: 431,
  internal_error: 500,
  not_implemented: 501,
  unavailable: 503,
  overloaded: 503,
} as const satisfies Record<string, number>

export type ErrorCode = keyof typeof ERROR_STATUS

export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[]

/** What each code means, for the README table and the OpenAPI description. */
export const ERROR_DESCRIPTIONS: Record<ErrorCode, string> = {
  invalid_request: 'The request is malformed: invalid JSON, a missing or invalid field, an unknown property or query parameter.',
  unauthorized: 'The API key is missing or not valid (unknown, revoked, expired or for another environment).',
  forbidden: 'The API key is valid but lacks the scope the operation needs (`pets:read` or `pets:write`); `WWW-Authenticate` names it.',
  not_found: 'No such route, or no pet with that id.',
  method_not_allowed: 'The path exists but not with this method; the `Allow` header lists the methods it has.',
  request_timeout: 'The client took too long to send the request.',
  idempotency_key_in_use: 'A request with this `Idempotency-Key` is still being processed; retry once it has finished.',
  gone: 'The operation has passed its sunset date and was removed.',
  payload_too_large: 'The request body is larger than 16 KiB.',
  unsupported_media_type: 'The request body is not `application/json` (UTF-8).',
  unsupported_content_encoding: 'The request body has a `Content-Encoding` other than `identity`; send it uncompressed (`Accept-Encoding: identity` says so).',
  expectation_failed: 'The `Expect` header asks for something other than `100-continue`, the only expectation the service meets.',
  idempotency_key_reused: 'This `Idempotency-Key` was already used with a different request body.',
  rate_limited: 'Too many requests for this API key (or, for failed authentication, this address); wait `Retry-After` seconds.',
  request_header_fields_too_large: 'The request headers are too large.',
  internal_error: 'A fault in the service. The message never carries details; they are logged with the request id.',
  not_implemented: 'The request method is not one the service knows, on any path; methods are case-sensitive (`get` is not `GET`).',
  unavailable: 'The database is not answering; retry later.',
  overloaded: 'The server has more work than it can do quickly right now; retry after `Retry-After` seconds, or on another instance.',
}

export interface ErrorBody {
  code: ErrorCode
  message: string
  status: number
}

/**
 * An error that is meant to reach the client as it is. Its message never carries an API key, even one
 * the client itself put where it does not belong (a path, a parameter, a body field): it is redacted.
 */
export class ApiError extends Error {
  readonly status: number

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(redactKeys(message))
    this.name = 'ApiError'
    this.status = ERROR_STATUS[code]
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.status }
  }
}
