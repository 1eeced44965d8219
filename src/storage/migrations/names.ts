/**
 * Every migration of each engine, by name, in the order they apply. Append-only: a new migration
 * gets the next number; released ones are never renamed. Both engines share one history: a number
 * used by one engine only (0004 and 0006: PostgreSQL's page reads) is skipped by the other. Each engine's
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
  ],
} as const

/**
 * True when the names recorded in `schema_migrations` are exactly `known`: nothing to apply and
 * nothing this version does not know. Only then may an engine skip loading Kysely and the
 * migrations (memory the server would keep for nothing: docs/decisions/0002-storage.md); any other case goes
 * through Kysely's Migrator, which applies what is missing or refuses a history it does not know.
 */
export function upToDate(recorded: readonly string[], known: readonly string[]): boolean {
  const names = new Set(recorded)
  return names.size === known.length && known.every((name) => names.has(name))
}
