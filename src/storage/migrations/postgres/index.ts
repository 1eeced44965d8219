import type { MIGRATION_NAMES } from '../names.js'
import type { PetstoreMigration } from '../run-migrations.js'
import * as initial from './0001-initial.js'
import * as idempotency from './0002-idempotency.js'
import * as rotationAndDeprecatedCalls from './0003-rotation-and-deprecated-calls.js'
import * as settledPetPages from './0004-settled-pet-pages.js'
import * as keyScopes from './0005-key-scopes.js'
import * as pagesOnReadOnlyServers from './0006-pages-on-read-only-servers.js'
import * as keyLineage from './0007-key-lineage.js'
import * as petRewrites from './0008-pet-rewrites.js'

/** The module of each name in MIGRATION_NAMES.postgres, loaded only when one is to be applied. */
export const postgresMigrations: Record<(typeof MIGRATION_NAMES.postgres)[number], PetstoreMigration> = {
  '0001-initial': initial,
  '0002-idempotency': idempotency,
  '0003-rotation-and-deprecated-calls': rotationAndDeprecatedCalls,
  '0004-settled-pet-pages': settledPetPages,
  '0005-key-scopes': keyScopes,
  '0006-pages-on-read-only-servers': pagesOnReadOnlyServers,
  '0007-key-lineage': keyLineage,
  '0008-pet-rewrites': petRewrites,
}
