import { type components, errorCodeValues } from './schema.js'

/** Every `code` the service documents (the `Error.code` enum of its OpenAPI document). */
export type ErrorCode = components['schemas']['Error']['code']

/**
 * An error the service answered, in its documented shape `{code, message, status}`. Failures to
 * reach the service at all (refused connection, DNS, abort) are not PetstoreErrors: they are what
 * `fetch` throws.
 */
export class PetstoreError extends Error {
  override readonly name = 'PetstoreError'

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number,
    /** The `X-Request-Id` of the response: quote it when reporting a problem. */
    readonly requestId: string | undefined,
    /** Seconds to wait before retrying, from `Retry-After` (429, 503); undefined when absent. */
    readonly retryAfter: number | undefined,
  ) {
    super(message)
  }
}

/**
 * A response the service's contract does not allow: an error body not in the documented shape
 * (a proxy's HTML page, a code this client does not know), or a success body that is not JSON.
 */
export class UnexpectedResponseError extends Error {
  override readonly name = 'UnexpectedResponseError'

  constructor(
    message: string,
    readonly status: number,
    /** The body as received. */
    readonly body: string,
    readonly requestId: string | undefined,
  ) {
    super(message)
  }
}

const KNOWN_CODES: ReadonlySet<string> = new Set(errorCodeValues)

/**
 * Seconds from a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), the
 * latter counted from `now` and never negative.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text)
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000))
}

/**
 * The error a non-success `response` stands for. `body` is its body as openapi-fetch hands it over:
 * parsed when it was JSON, the text otherwise, undefined when empty.
 */
export function errorFromResponse(response: Response, body: unknown): PetstoreError | UnexpectedResponseError {
  const requestId = response.headers.get('x-request-id') ?? undefined
  if (isErrorBody(body) && body.status === response.status) {
    return new PetstoreError(body.code, body.message, body.status, requestId, parseRetryAfter(response.headers.get('retry-after')))
  }
  return new UnexpectedResponseError(
    `HTTP ${response.status} without a Pet Store error body`,
    response.status,
    typeof body === 'string' ? body : (JSON.stringify(body) ?? ''),
    requestId,
  )
}

function isErrorBody(body: unknown): body is components['schemas']['Error'] {
  if (typeof body !== 'object' || body === null) return false
  const { code, message, status } = body as Record<string, unknown>
  return typeof code === 'string' && KNOWN_CODES.has(code) && typeof message === 'string' && typeof status === 'number'
}
