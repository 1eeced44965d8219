import type { Migration } from 'kysely'
import * as initial from './0001-initial.js'
import * as idempotency from './0002-idempotency.js'
import * as rotationAndDeprecatedCalls from './0003-rotation-and-deprecated-calls.js'

/** Append-only: a new migration gets the next number; released ones are never edited. */
export const sqliteMigrations: Record<string, Migration> = {
  '0001-initial': initial,
  '0002-idempotency': idempotency,
  '0003-rotation-and-deprecated-calls': rotationAndDeprecatedCalls,
}
