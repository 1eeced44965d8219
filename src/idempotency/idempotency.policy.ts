/*
 * How long idempotency records count: the service enforces these, and the schema of the
 * `Idempotency-Key` header promises the retention to clients.
 */

/** How long a key's response is kept and answered again: the key may be used afresh after this. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000

/**
 * An attempt still in progress after this long is taken to have died with its process, so that a
 * crash does not block its key for the whole retention. A slower attempt that is still alive
 * cannot create a second pet: its insert is refused once another attempt holds the key.
 */
export const IDEMPOTENCY_ABANDONED_AFTER_MS = 60_000

/** Expired records are deleted at most this often per process. */
export const IDEMPOTENCY_PRUNE_INTERVAL_MS = 60_000
