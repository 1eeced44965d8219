import fs from 'node:fs'
import { type CliIo, describeDatabase, postgresDatabase, progressReporter, table, withStorage } from '../cli/output.js'
import { UsageError, parse } from '../cli/usage.js'
import { type Config, ConfigError, type DatabaseConfig, loadConfig } from '../config.js'
import { openStorage } from '../repositories.js'
import { checkSqliteFolder } from '../storage/open-database.js'
import { copyDatabase, type TableSummary } from './copy.service.js'

export const COPY_HELP = `Usage: petstore copy --from URL --to URL

Copies the pets (with their ids), API keys (hashes, expiry, revocation, rotation, last use),
Idempotency-Key records and deprecated-call counts of one database into another, in either
direction between SQLite and PostgreSQL. URLs are written as DATABASE_URL is:
sqlite:///absolute/path.db or postgres://user:password@host:5432/db.
The source is read as one consistent snapshot and never written: it may keep serving, and what
it commits after the copy begins is not copied. The target gets its migrations, must then be
empty (otherwise exit 1, nothing written), and is written in one transaction, verified (row
counts and a SHA-256 of every table, the same on both sides) before it commits: a copy that fails
or is killed leaves the target empty, and can simply be run again. Its next pet id follows the
largest copied one.
  --from URL   The database to copy
  --to URL     The empty database to copy into (migrated first; a SQLite file is created if needed)`

/** The database an option names, in DATABASE_URL's form; a malformed one is a usage error. */
function databaseOption(io: CliIo, option: string, url: string): Config {
  try {
    // The option replaces DATABASE_URL in either of its forms.
    return loadConfig({ ...io.env, DATABASE_URL: url, DATABASE_URL_FILE: undefined }, io.cwd)
  } catch (error) {
    if (error instanceof ConfigError && error.variable === 'DATABASE_URL') {
      throw new UsageError(error.message.replace(/^DATABASE_URL/, option), 'copy')
    }
    throw error
  }
}

function sameDatabase(a: DatabaseConfig, b: DatabaseConfig): boolean {
  if (a.engine === 'sqlite') return b.engine === 'sqlite' && a.path === b.path
  if (b.engine === 'sqlite') return false
  const [x, y] = [postgresDatabase(a.url), postgresDatabase(b.url)]
  return x.name === y.name && x.host === y.host
}

export async function copyCommand(args: string[], io: CliIo): Promise<0 | 1> {
  const { values } = parse('copy', args, { from: { type: 'string' }, to: { type: 'string' } })
  if (values.from === undefined) throw new UsageError('--from is required: the URL of the database to copy', 'copy')
  if (values.to === undefined) throw new UsageError('--to is required: the URL of the empty database to copy into', 'copy')
  const from = databaseOption(io, '--from', values.from).database
  const target = databaseOption(io, '--to', values.to)
  if (sameDatabase(from, target.database)) throw new UsageError('--from and --to name the same database', 'copy')
  checkSqliteFolder(target.database, '--to')
  if (from.engine === 'sqlite' && !fs.existsSync(from.path)) {
    io.stderr(`petstore: there is no SQLite database at ${from.path} to copy (see --from)\n`)
    return 1
  }
  // Opened, never migrated: the copy does not write to its source, which may be serving.
  const source = await openStorage(from, '--from')
  try {
    await source.ping().catch((error: unknown) => {
      throw new Error(`cannot reach the database named by --from: ${(error as Error).message}`, { cause: error })
    })
    io.stderr(`${describeDatabase(from, io.cwd, false, 'Copying from')}\n`)
    let progress: ReturnType<typeof progressReporter> | undefined
    const copied = await withStorage(
      target,
      io,
      (storage) =>
        copyDatabase({
          from: source.copy,
          to: storage.copy,
          phase: (name) => {
            progress?.end()
            const current = progressReporter(io, name === 'copying' ? 'Copying' : 'Verifying', 'rows')
            progress = current
            return current.update
          },
        }).finally(() => progress?.end()),
      { lead: 'Copying into', named: '--to' },
    )
    io.stdout(
      `Copied ${describeDatabase(from, io.cwd, false, 'from')} ${describeDatabase(target.database, io.cwd, false, 'into')}.\n` +
        'Verified: every table has the same rows and checksum on both sides.\n' +
        table([['TABLE', 'ROWS', 'SHA-256'], ...copied.map((t: TableSummary) => [t.table, String(t.rows), t.sha256])]) +
        '\n',
    )
    return 0
  } finally {
    await source.close()
  }
}
