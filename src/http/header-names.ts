/**
 * The request header that makes a create safe to retry (draft-ietf-httpapi-idempotency-key-header), as
 * the wire and the documents write it. It is named here, below the features, because the HTTP layer
 * handles it as well as the idempotency feature: it may be sent only once (http-protocol.ts), and a
 * browser page may send it (cors.ts).
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key'

/** The same name as Fastify holds a request's headers and matches their schemas: lower case. */
export const IDEMPOTENCY_KEY = IDEMPOTENCY_KEY_HEADER.toLowerCase() as Lowercase<typeof IDEMPOTENCY_KEY_HEADER>

/** The answer's header that says a keyed create was answered again, not made again (the same draft). */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed'

/**
 * The request id, which a client may send and every answer carries (the probes' included), as Node and
 * Fastify hold header names: lower case.
 */
export const REQUEST_ID = 'x-request-id'

/** The `Content-Type` of every JSON answer: bodies, errors and the probes'. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'
