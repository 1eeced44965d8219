import fs from 'node:fs'
import { type CliIo, describeDatabase, table, withStorage } from './output.js'
import { UsageError, parse } from './usage.js'
import { type Config, loadConfig } from '../config.js'
import { releaseVersion } from '../shared/release.js'
import { allows } from '../storage/migrations/compatibility.js'
import { readMigrationState } from '../storage/open-database.js'

export const MIGRATE_HELP = `Usage: petstore migrate [--status [--json]]

Applies pending migrations to the database of DATABASE_URL (creating a SQLite file if needed, in a folder
that exists; only the default ./data is made).

  --status   Change nothing: list the migrations applied, pending, and unknown (applied by a newer release,
             which this one runs beside), and the oldest release the database allows.
  --json     With --status: the same as one JSON object on stdout.

Exit codes of --status: 0 up to date, and this release may run on it; 3 migrations are pending (run
"petstore migrate"); 4 a newer release's breaking migration forbids this release; 1 the database cannot be read.`

/** `migrate --status`'s exit codes beyond 0, 1 and 2 (docs/cli.md). */
const PENDING = 3
const REFUSED = 4

export async function migrateCommand(args: string[], io: CliIo): Promise<0 | typeof PENDING | typeof REFUSED> {
  const { values } = parse('migrate', args, { status: { type: 'boolean' }, json: { type: 'boolean' } })
  if (values.json === true && values.status !== true) throw new UsageError('--json goes with --status', 'migrate')
  const config = loadConfig(io.env, io.cwd)
  if (values.status === true) return statusCommand(config, io, values.json === true)
  const applied = await withStorage(config, io, async (_storage, applied) => applied)
  io.stdout(applied.length === 0 ? 'Database is up to date.\n' : `Applied: ${applied.join(', ')}\n`)
  return 0
}

async function statusCommand(
  config: Config,
  io: CliIo,
  json: boolean,
): Promise<0 | typeof PENDING | typeof REFUSED> {
  const { database } = config
  const exists = database.engine === 'postgres' || fs.existsSync(database.path)
  const state = await readMigrationState(database)
  const release = releaseVersion()
  const allowed = allows(state, release)
  const code = !allowed ? REFUSED : state.pending.length > 0 ? PENDING : 0
  const oldest = state.oldestRelease
  if (json) {
    const oldestRelease = oldest === undefined ? null : { release: oldest.oldestRelease, migration: oldest.migration, reason: oldest.reason }
    io.stdout(JSON.stringify({ release, applied: state.applied, pending: state.pending, unknown: state.unknown, oldestRelease, allowed }, null, 2) + '\n')
    return code
  }
  io.stderr(`${describeDatabase(database, io.cwd, false, 'Reading')}${exists ? '' : ' (it does not exist yet)'}\n`)
  const rows = [
    ...state.applied.map((name) => [name, 'applied']),
    ...state.pending.map((name) => [name, 'pending']),
    ...state.unknown.map((name) => [name, 'unknown: applied by a newer release']),
  ].sort(([a = ''], [b = '']) => a.localeCompare(b))
  const verdict =
    code === REFUSED
      ? `petstore ${release} may not run on it: it needs ${oldest?.oldestRelease ?? ''} or later.`
      : code === PENDING
        ? `${state.pending.length} pending: run "petstore migrate" (serve applies them too).`
        : `Up to date: petstore ${release} runs on it.`
  io.stdout(
    `${table([['MIGRATION', 'STATE'], ...rows])}\n\n` +
      `Oldest release allowed: ${oldest === undefined ? 'any (no breaking migration applied)' : `${oldest.oldestRelease} (${oldest.migration} ${oldest.reason})`}\n` +
      `${verdict}\n`,
  )
  return code
}
