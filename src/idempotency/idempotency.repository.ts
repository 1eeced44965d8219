import type { Claim } from '../storage/claim.js'

/** The response a request with an `Idempotency-Key` answered, kept to be answered again. */
export interface StoredResponse {
  status: number
  location: string
  /** The body exactly as it was sent. */
  body: string
}

/**
 * A request's use of an `Idempotency-Key`, within the scope of one client, and the instants that
 * decide whether a record already there still holds the key.
 */
export interface IdempotentRequest {
  /** The lineage of the API key that sent the request (`ApiKey.lineage`): the id of its rotation chain's first key. */
  scope: string
  key: string
  /** Unique to this attempt: written to the record it makes. */
  attemptId: string
  /** The request's fingerprint: what makes a later request with the same key "the same". */
  fingerprint: string
  now: number
  /**
   * A record in progress created before this instant is abandoned and may be taken over. Only an
   * earlier release of the service, which committed its claim before the pet, left such records.
   */
  abandonedBefore: number
  /** Any record created before this instant has expired and may be taken over. */
  expiredBefore: number
}

/** The record that holds a key when a request could not take it. */
export type HeldRecord =
  /** Without a fingerprint when the request holding the key has not committed its record yet. */
  | { state: 'in_progress'; fingerprint?: string }
  | { state: 'completed'; fingerprint: string; response: StoredResponse }

/** The columns both engines read back, with the same types on each (rows never leave the repositories). */
export interface IdempotencyRow {
  fingerprint: string
  response_status: number | null
  response_location: string | null
  response_body: string | null
}

/** For the engine repositories: the record a row holds. */
export function toHeldRecord(row: IdempotencyRow): HeldRecord {
  if (row.response_status === null || row.response_body === null) {
    return { state: 'in_progress', fingerprint: row.fingerprint }
  }
  return {
    state: 'completed',
    fingerprint: row.fingerprint,
    response: { status: row.response_status, location: row.response_location ?? '', body: row.response_body },
  }
}

/** Where idempotency records are kept. One implementation per storage engine; rows never leave it. */
export interface IdempotencyRepository {
  /**
   * The request's claim of its key, for the transaction of the write it answers for (the pet's
   * create): taking it makes a new record, or takes over one that expired or was abandoned, or
   * finds the live record that holds the key; completing it stores the response. The claim ends
   * with that transaction, so a request that dies with its process or its connection leaves
   * neither a pet nor a record. A request that meets the uncommitted record of a concurrent one
   * waits for it to end, and then sees its outcome.
   */
  claim(request: IdempotentRequest): Claim<StoredResponse, HeldRecord>
  /** Deletes every record created before `before`; resolves to how many. */
  prune(before: number): Promise<number>
}
