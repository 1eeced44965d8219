import type { MIGRATION_NAMES } from '../names.js'
import type { PetstoreMigration } from '../run-migrations.js'
import * as initial from './0001-initial.js'
import * as idempotency from './0002-idempotency.js'
import * as rotationAndDeprecatedCalls from './0003-rotation-and-deprecated-calls.js'
import * as keyScopes from './0005-key-scopes.js'
import * as keyLineage from './0007-key-lineage.js'

/** The module of each name in MIGRATION_NAMES.sqlite, loaded only when one is to be applied. */
export const sqliteMigrations: Record<(typeof MIGRATION_NAMES.sqlite)[number], PetstoreMigration> = {
  '0001-initial': initial,
  '0002-idempotency': idempotency,
  '0003-rotation-and-deprecated-calls': rotationAndDeprecatedCalls,
  '0005-key-scopes': keyScopes,
  '0007-key-lineage': keyLineage,
}
