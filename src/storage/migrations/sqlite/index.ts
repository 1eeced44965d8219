import type { Migration } from 'kysely'
import * as initial from './0001-initial.js'
import * as idempotency from './0002-idempotency.js'
import * as rotationAndDeprecatedCalls from './0003-rotation-and-deprecated-calls.js'
import * as keyScopes from './0005-key-scopes.js'

/**
 * Append-only: a new migration gets the next number; released ones are never edited. Both engines
 * share one history: 0004 is PostgreSQL's only (its page reads).
 */
export const sqliteMigrations: Record<string, Migration> = {
  '0001-initial': initial,
  '0002-idempotency': idempotency,
  '0003-rotation-and-deprecated-calls': rotationAndDeprecatedCalls,
  '0005-key-scopes': keyScopes,
}
