/**
 * The largest request body the service reads, in bytes: a pet is a few dozen. Below every layer, since the
 * parser enforces it, the error catalogue and the OpenAPI document state it, and the 413 names it.
 */
export const BODY_LIMIT_BYTES = 16 * 1024
