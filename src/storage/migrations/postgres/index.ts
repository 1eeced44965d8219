import type { Migration } from 'kysely'
import * as initial from './0001-initial.js'
import * as idempotency from './0002-idempotency.js'
import * as rotationAndDeprecatedCalls from './0003-rotation-and-deprecated-calls.js'
import * as settledPetPages from './0004-settled-pet-pages.js'
import * as keyScopes from './0005-key-scopes.js'

/**
 * Append-only, and named as the SQLite migrations are: both engines share one history. A number
 * used by one engine only (0004: PostgreSQL's page reads) is skipped by the other.
 */
export const postgresMigrations: Record<string, Migration> = {
  '0001-initial': initial,
  '0002-idempotency': idempotency,
  '0003-rotation-and-deprecated-calls': rotationAndDeprecatedCalls,
  '0004-settled-pet-pages': settledPetPages,
  '0005-key-scopes': keyScopes,
}
