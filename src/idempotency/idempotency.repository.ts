import type { NewPet, Pet } from '../pets/pets.repository.js'

/** The response a request with an `Idempotency-Key` answered, kept to be answered again. */
export interface StoredResponse {
  status: number
  location: string
  /** The body exactly as it was sent. */
  body: string
}

/**
 * One attempt at the request of an `Idempotency-Key`, within the scope of one API key. Only the
 * attempt that holds the key's record may complete or release it.
 */
export interface IdempotencyAttempt {
  /** The id of the API key that sent the request. */
  scope: string
  key: string
  /** Unique to this attempt. */
  attemptId: string
}

/** The record that holds a key when an attempt could not claim it. */
export type HeldRecord =
  | { state: 'in_progress'; fingerprint: string }
  | { state: 'completed'; fingerprint: string; response: StoredResponse }

export interface ClaimOptions {
  /** The request's fingerprint: what makes a later request with the same key "the same". */
  fingerprint: string
  now: number
  /** An in-progress record created before this instant is abandoned and may be taken over. */
  abandonedBefore: number
  /** Any record created before this instant has expired and may be taken over. */
  expiredBefore: number
}

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
   * Gives `attempt` the key by inserting an in-progress record, or by taking over an abandoned or
   * expired one. Resolves undefined when the attempt now holds the key, else to the record that does.
   */
  claim(attempt: IdempotencyAttempt, options: ClaimOptions): Promise<HeldRecord | undefined>
  /**
   * In one transaction: inserts the pet and records `respond(pet)` as the attempt's response.
   * Resolves undefined, having written nothing, when the attempt no longer holds the key.
   */
  createPet(
    attempt: IdempotencyAttempt,
    pet: NewPet,
    createdAt: number,
    respond: (pet: Pet) => StoredResponse,
  ): Promise<StoredResponse | undefined>
  /** Deletes the attempt's record if it is still in progress, so that the key may be used again. */
  release(attempt: IdempotencyAttempt): Promise<void>
  /** Deletes every record created before `before`; resolves to how many. */
  prune(before: number): Promise<number>
}
