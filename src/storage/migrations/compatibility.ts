import semver from 'semver'

/*
 * The schema's compatibility window (docs/decisions/0022-schema-compatibility-window.md): a release runs on
 * a database that a newer release migrated, as long as every migration it does not know only adds. A
 * migration that would break older releases says so (`breaks` in its module); applying it records, in
 * `schema_compatibility`, the oldest release that may still run, and older releases refuse the database.
 */

/** The mark of a migration that older releases cannot run beside: a drop, a rename, a changed meaning. */
export interface BreakingChange {
  /** The oldest release that runs on the schema once the migration is applied: one already using what replaces what it removes. */
  readonly oldestRelease: string
  /** What changed, for the refusal's line: "drops pets.legacy_name". */
  readonly reason: string
}

/** A row of `schema_compatibility`: a breaking migration that this database has applied. */
export interface CompatibilityMark extends BreakingChange {
  readonly migration: string
}

/** What a database records of its migrations: the names in `schema_migrations`, and its marks. */
export interface RecordedMigrations {
  readonly names: readonly string[]
  readonly marks: readonly CompatibilityMark[]
}

/** A database's migrations against those this release knows. */
export interface MigrationState {
  /** Known and applied, in the order they apply. */
  readonly applied: string[]
  /** Known and not applied yet. */
  readonly pending: string[]
  /** Applied by a newer release: this one does not know them. */
  readonly unknown: string[]
  /** The mark that asks for the newest release, if any breaking migration was applied. */
  readonly oldestRelease: CompatibilityMark | undefined
}

/** The table of the marks. Its shape is shared by every release from 1.1.0 on: it never changes. */
export const COMPATIBILITY_TABLE = 'schema_compatibility'

export function migrationState(recorded: RecordedMigrations, known: readonly string[]): MigrationState {
  const names = new Set(recorded.names)
  const knownNames = new Set(known)
  const oldestRelease = recorded.marks.reduce<CompatibilityMark | undefined>(
    (newest, mark) => (newest === undefined || semver.gt(mark.oldestRelease, newest.oldestRelease) ? mark : newest),
    undefined,
  )
  return {
    applied: known.filter((name) => names.has(name)),
    pending: known.filter((name) => !names.has(name)),
    unknown: [...names].filter((name) => !knownNames.has(name)).sort(),
    oldestRelease,
  }
}

/** A database that a newer release changed in a way this one cannot run on. */
export class IncompatibleDatabaseError extends Error {}

/** Whether `release` may run on a database in `state`: not below the oldest release its marks allow. */
export function allows(state: MigrationState, release: string): boolean {
  return state.oldestRelease === undefined || semver.gte(release, state.oldestRelease.oldestRelease)
}

/** Throws, in one line naming the release needed and what to do, unless `release` may run on the database. */
export function assertAllowed(state: MigrationState, release: string): void {
  const mark = state.oldestRelease
  if (mark === undefined || allows(state, release)) return
  throw new IncompatibleDatabaseError(
    `this database needs petstore ${mark.oldestRelease} or later, and this is ${release}: migration ${mark.migration} ${mark.reason}. ` +
      `Run petstore ${mark.oldestRelease} or later here, or restore a backup taken before that migration to roll back further`,
  )
}

/** The one warning of a release running on a newer release's schema. */
export function unknownMigrationsWarning(unknown: readonly string[]): string {
  return (
    `the database has migrations this release does not know, applied by a newer release: ${unknown.join(', ')}. ` +
    'None is marked as breaking, so this release runs on their schema (docs/upgrading.md)'
  )
}
