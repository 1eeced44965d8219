/**
 * Every migration of each engine, by name, in the order they apply. Append-only: a new migration
 * gets the next number; released ones are never renamed. Both engines share one history: a number
 * used by one engine only (0004 and 0006: PostgreSQL's page reads; 0008: its count of rewrites) is skipped by the other. Each engine's
 * index.ts maps exactly these names to their modules, which the compiler checks.
 */
export const MIGRATION_NAMES = {
  sqlite: ['0001-initial', '0002-idempotency', '0003-rotation-and-deprecated-calls', '0005-key-scopes', '0007-key-lineage'],
  postgres: [
    '0001-initial',
    '0002-idempotency',
    '0003-rotation-and-deprecated-calls',
    '0004-settled-pet-pages',
    '0005-key-scopes',
    '0006-pages-on-read-only-servers',
    '0007-key-lineage',
    '0008-pet-rewrites',
  ],
} as const
