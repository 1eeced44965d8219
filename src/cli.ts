import fs from 'node:fs'
import path from 'node:path'
import { type ParseArgsConfig, parseArgs } from 'node:util'
import { KEY_ID_PREFIX, containsKey, redactKeys } from './api-keys/api-keys.format.js'
import type { ApiKey } from './api-keys/api-keys.repository.js'
import { SCOPES, type Scope, parseScopes } from './api-keys/api-keys.scopes.js'
import { createApiKeysService, type RotationRefusal } from './api-keys/api-keys.service.js'
import { buildApp, GET_PET_SUNSET } from './app.js'
import { systemClock } from './clock.js'
import { CONFIG_NAMES, type Config, ConfigError, type DatabaseConfig, describeVariable, loadConfig } from './config.js'
import { createLogger } from './logger.js'
import { isWorker, parseWorkers, runPrimary } from './cluster.js'
import { copyDatabase, type TableSummary } from './copy/copy.service.js'
import { createDeprecationsService } from './deprecations/deprecations.service.js'
import { getPetSchema } from './pets/pets.schemas.js'
import { closeOnSignals, startServer, stopWithNpm } from './server.js'
import { openMigratedStorage, openStorage } from './storage/open-storage.js'
import type { Storage } from './storage/storage.js'
import type { Tracing } from './tracing/tracing.js'

export interface CliIo {
  env: Readonly<Record<string, string | undefined>>
  cwd: string
  stdout: (text: string) => void
  stderr: (text: string) => void
  /** stderr is a terminal: progress is one line redrawn in place rather than lines. */
  interactive?: boolean
  /** Started by the entry point when an OTLP endpoint is configured: `serve` traces its requests. */
  tracing?: Tracing
}

/** What `main` ends with: an exit code, or `serving` when a server now keeps the process alive. */
export type CliOutcome = 0 | 1 | 2 | 'serving'

/**
 * A mistake in the command line: exit 2, naming the help of `topic`. Its message may quote what was
 * typed, so a key pasted where it does not belong is redacted from it.
 */
class UsageError extends Error {
  constructor(
    message: string,
    readonly topic?: Topic,
  ) {
    super(redactKeys(message))
  }
}

const HELP = {
  main: `Usage: petstore <command> [options]

Commands:
  serve [--workers N]   Run the HTTP service (migrates the database first)
  migrate               Apply pending database migrations and exit
  backup <file>         Copy the SQLite database, while it serves, to a new file
  copy --from URL --to URL
                        Copy every pet, key and record into an empty database (SQLite or PostgreSQL)
  openapi               Print the OpenAPI document
  deprecations          Who still calls the deprecated getPet, and until when
  keys create           Create an API key
  keys list             List API keys
  keys revoke <id>      Revoke an API key
  keys rotate <id>      Replace an API key, the old one working for a grace period

Configuration comes from environment variables (see README). Run "petstore <command> --help" for more.
Exit codes: 0 success, 1 failure, 2 usage error.`,
  serve: `Usage: petstore serve [--workers N|auto]

Runs the HTTP service (applying pending migrations first).
  --workers N   N processes sharing the port (node:cluster); auto = one per core. Default 1.

It reads these environment variables:
${table(CONFIG_NAMES.map((name) => ['', name, describeVariable(name)]))}`,
  migrate: 'Usage: petstore migrate\n\nApplies pending migrations to the database of DATABASE_URL (creating it if needed).',
  backup: `Usage: petstore backup <file> [--force]

Copies the SQLite database of DATABASE_URL to <file>: one consistent snapshot, taken while servers
keep serving and writing (what they write after the backup begins is not in it). The copy is written
beside <file> and renamed into place when complete, so <file> is never half a backup.
Restore: stop the service, replace the database file with the backup, start the service.
On PostgreSQL, use pg_dump instead (exit 2).
  --force   Overwrite <file> if it exists (otherwise an existing <file> is refused, exit 1)`,
  copy: `Usage: petstore copy --from URL --to URL

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
  --to URL     The empty database to copy into (migrated first; a SQLite file is created if needed)`,
  openapi: 'Usage: petstore openapi\n\nPrints the OpenAPI 3.1 document the service serves at /v1/openapi.json.',
  deprecations: `Usage: petstore deprecations [--json]

Lists every API key that called the deprecated getPet (GET /v1/pets/{petId}): id, name, calls,
first and last call, most recent first, and the days left until its sunset on 2030-12-05.
Calls are counted per key once the key is authenticated, whatever the answer (404 and, after
the sunset, 410 included); calls without a valid key have no key to count against. Servers
write their counts every 10 seconds and when they stop, so a call shows here within about 10 s.
  --json   Print a JSON object instead of text`,
  keys: `Usage: petstore keys <create|list|revoke|rotate> [options]

Run "petstore keys <command> --help" for the options of each.`,
  'keys create': `Usage: petstore keys create --name NAME [--scope SCOPES] [--expires-in DURATION] [--json]

Creates an API key for the environment of PETSTORE_ENV and prints it once: the key alone is
the last line of output (or, with --json, the "key" member). Only its SHA-256 hash is kept.
  --name NAME            Who or what the key is for (1-100 characters)
  --scope SCOPES         What it may do, comma-separated: pets:read (listPets, getPet),
                         pets:write (createPet). Default pets:read,pets:write
  --expires-in DURATION  Lifetime such as 30m, 12h, 90d or 4w; default: never expires
  --json                 Print a JSON object instead of text`,
  'keys list': `Usage: petstore keys list [--json]

Lists keys: id, name, prefix, environment, scopes, created, last used, expires, revoked, and the
key each rotated key was replaced by. Never the secret.
  --json   Print a JSON array instead of a table`,
  'keys revoke': `Usage: petstore keys revoke <id>

Revokes a key; running servers refuse it within 1 second.`,
  'keys rotate': `Usage: petstore keys rotate <id> [--grace DURATION] [--json]

Creates a new key for the same client: same name, environment and scopes, and, if the old key expires,
the same lifetime counted from now. The new key is printed once, alone on the last line (or as
"key" with --json). The old key keeps working until the grace period ends (or until it would
have expired anyway), then is refused; keys list shows which key replaced it.
A revoked, expired or already rotated key cannot be rotated (rotate its replacement instead).
  --grace DURATION  How long the old key keeps working: 30m, 12h, 7d, 2w, or 0 for not at all.
                    Default 24h.
  --json            Print a JSON object instead of text`,
} as const

type Topic = keyof typeof HELP

const DURATION_UNITS_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
const MAX_LIFETIME_MS = 10 * 365 * 86_400_000

/** `30m`, `12h`, `90d`, `4w` (and `0` if `zero`) in milliseconds, at most 10 years; anything else is a usage error naming `option`. */
export function parseDuration(
  text: string,
  { option = '--expires-in', topic, zero = false }: { option?: string; topic?: Topic; zero?: boolean } = {},
): number {
  if (zero && text === '0') return 0
  const match = /^([1-9][0-9]{0,5})([mhdw])$/.exec(text)
  const ms = match === null ? Number.NaN : Number(match[1]) * (DURATION_UNITS_MS[match[2] ?? ''] ?? Number.NaN)
  if (!(ms <= MAX_LIFETIME_MS)) {
    const what = zero ? '0 or a duration' : 'a positive duration'
    throw new UsageError(`${option} must be ${what} such as 30m, 12h, 90d or 4w, at most 10 years; got "${text}"`, topic)
  }
  return ms
}

const DEFAULT_GRACE = '24h'

const helpOption = { help: { type: 'boolean', short: 'h' } } as const

/**
 * A parseArgs error in the CLI's own words, on one line: parseArgs explains some mistakes over several
 * lines, in terms of its own API (`as in '-- "--all"'`).
 */
function parseArgsMistake(error: NodeJS.ErrnoException): string {
  const option = /'(-[^' ]+)/.exec(error.message)?.[1]
  if (option !== undefined) {
    if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option "${option}"`
    if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      return error.message.includes('argument missing') ? `${option} needs a value` : `${option} takes no value`
    }
  }
  return error.message.replace(/\s*\n\s*/g, ' ')
}

/** Parses the options of `topic` strictly; exactly `positionals` arguments besides them (none by default). */
function parse<const O extends NonNullable<ParseArgsConfig['options']>>(
  topic: Topic,
  args: string[],
  options: O,
  { positionals = 0, what = 'argument' }: { positionals?: number; what?: string } = {},
) {
  let parsed
  try {
    parsed = parseArgs({ args, options: { ...helpOption, ...options }, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(parseArgsMistake(error as NodeJS.ErrnoException), topic)
  }
  if (parsed.positionals.length > positionals) {
    throw new UsageError(`unexpected argument "${parsed.positionals[positionals] ?? ''}"`, topic)
  }
  if (parsed.positionals.length < positionals) throw new UsageError(`${topic} needs a ${what}`, topic)
  return parsed
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString()
}

function describeKey(key: ApiKey) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    environment: key.environment,
    scopes: key.scopes,
    createdAt: iso(key.createdAt),
    lastUsedAt: iso(key.lastUsedAt),
    expiresAt: iso(key.expiresAt),
    revokedAt: iso(key.revokedAt),
    replacedBy: key.replacedBy,
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n')
}

/**
 * Which database a command opened, for people: run from another folder, the default
 * `./data/petstore.db` is another database than the running server's, and a key made there is refused.
 */
function describeDatabase(database: DatabaseConfig, cwd: string, created: boolean, lead = 'Using'): string {
  if (database.engine === 'sqlite') {
    const relative = path.relative(cwd, database.path)
    const shown = relative.startsWith('..') || path.isAbsolute(relative) ? database.path : `./${relative}`
    return `${lead} SQLite database ${shown}${created ? ' (created)' : ''}`
  }
  const { name, host } = postgresDatabase(database.url)
  return `${lead} PostgreSQL database ${name} on ${host}`
}

/** The database a PostgreSQL URL names, and its server: never the password. */
function postgresDatabase(text: string): { name: string; host: string } {
  const url = new URL(text)
  const name = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  return { name, host: `${url.hostname}:${url.port || '5432'}` }
}

/**
 * Where a command says which database it opened: to a person, on stderr (stdout stays the command's
 * result, for scripts), and not at all with --json.
 */
function humanOutput(io: CliIo, json?: boolean): CliIo | undefined {
  return json === true ? undefined : io
}

/**
 * Opens the database, brings it up to date (creating it if needed), runs `work`, closes it. `output`
 * (see humanOutput) first gets the line naming the database.
 */
async function withStorage<T>(
  config: Config,
  output: CliIo | undefined,
  work: (storage: Storage, applied: string[]) => Promise<T>,
  { lead = 'Using', named = 'DATABASE_URL' }: { lead?: string; named?: string } = {},
): Promise<T> {
  const { database } = config
  const created = database.engine === 'sqlite' && !fs.existsSync(database.path)
  const { storage, applied } = await openMigratedStorage(database, named)
  output?.stderr(`${describeDatabase(database, output.cwd, created, lead)}\n`)
  try {
    return await work(storage, applied)
  } finally {
    await storage.close()
  }
}

/** `--scope`, given once or more, each comma-separated: the scopes, or a usage error naming the unknown ones. */
function scopesOption(given: string[] | undefined): Scope[] | undefined {
  if (given === undefined) return undefined
  const parsed = parseScopes(given)
  if ('unknown' in parsed) {
    const words = parsed.unknown.map((word) => (word === '' ? 'an empty one' : `"${word}"`)).join(', ')
    throw new UsageError(`--scope takes ${SCOPES.join(' and ')}, comma-separated; not ${words}`, 'keys create')
  }
  return parsed.scopes
}

/**
 * `given`, the id `topic` acts on; a key's secret instead is a usage error that does not repeat it,
 * for the terminal, its scrollback and a CI log would then hold it too.
 */
function keyIdArgument(given: string, topic: 'keys revoke' | 'keys rotate'): string {
  if (!containsKey(given)) return given
  throw new UsageError(
    `${topic} takes a key's id (${KEY_ID_PREFIX}…), not its secret, which is not repeated here; ` +
      "find the id by matching the secret's first characters to the PREFIX column of: petstore keys list",
    topic,
  )
}

/** Says why `keys rotate` refused, as the one line a failure prints. */
function rotationRefusal(id: string, refusal: RotationRefusal): string {
  switch (refusal.refused) {
    case 'unknown':
      return `no API key has id "${id}" (see: petstore keys list)`
    case 'revoked':
      return `API key ${id} was revoked at ${iso(refusal.key.revokedAt)} and cannot be rotated; create a new one with: petstore keys create --name NAME`
    case 'expired':
      return `API key ${id} expired at ${iso(refusal.key.expiresAt)} and cannot be rotated; create a new one with: petstore keys create --name NAME`
    case 'rotated':
      return `API key ${id} was already rotated to ${refusal.replacedBy}; rotate ${refusal.replacedBy} instead, or revoke ${id} to end its grace period now`
  }
}

async function keysCommand(sub: string | undefined, args: string[], io: CliIo): Promise<0 | 1> {
  const keysService = (storage: Storage, config: Config) =>
    createApiKeysService({ apiKeys: storage.apiKeys, clock: systemClock, environment: config.environment })

  switch (sub) {
    case 'create': {
      const { values } = parse('keys create', args, {
        name: { type: 'string' },
        scope: { type: 'string', multiple: true },
        'expires-in': { type: 'string' },
        json: { type: 'boolean' },
      })
      const name = values.name?.trim() ?? ''
      if (name === '' || name.length > 100) throw new UsageError('--name is required: 1 to 100 characters', 'keys create')
      // A name is listed and printed by every later command: it must not be where a secret ends up.
      if (containsKey(name)) throw new UsageError('--name must not hold an API key; name the key after who or what uses it', 'keys create')
      const scopes = scopesOption(values.scope)
      const expiresInMs = values['expires-in'] === undefined ? undefined : parseDuration(values['expires-in'], { topic: 'keys create' })
      const config = loadConfig(io.env, io.cwd)
      const { key, secret } = await withStorage(config, humanOutput(io, values.json), (storage) =>
        keysService(storage, config).create({ name, expiresInMs, scopes }),
      )
      if (values.json === true) {
        io.stdout(JSON.stringify({ ...describeKey(key), key: secret }) + '\n')
      } else {
        io.stdout(
          `Created API key ${key.id} "${key.name}" for ${key.environment}, scopes ${key.scopes.join(',')}` +
            `${key.expiresAt === null ? '' : `, expires ${iso(key.expiresAt)}`}.\n` +
            'Store it now: it is shown only once.\n' +
            `${secret}\n`,
        )
      }
      return 0
    }
    case 'list': {
      const { values } = parse('keys list', args, { json: { type: 'boolean' } })
      const config = loadConfig(io.env, io.cwd)
      const keys = (await withStorage(config, humanOutput(io, values.json), (storage) => keysService(storage, config).list())).map(describeKey)
      if (values.json === true) {
        io.stdout(JSON.stringify(keys, null, 2) + '\n')
      } else if (keys.length === 0) {
        io.stdout('No API keys yet. Create one with: petstore keys create --name NAME\n')
      } else {
        const header = ['ID', 'NAME', 'PREFIX', 'ENVIRONMENT', 'SCOPES', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED', 'REPLACED BY']
        const rows = keys.map((k) => [
          k.id,
          k.name,
          `${k.prefix}…`,
          k.environment,
          k.scopes.join(','),
          k.createdAt ?? '-',
          k.lastUsedAt ?? 'never',
          k.expiresAt ?? 'never',
          k.revokedAt ?? 'no',
          k.replacedBy ?? '-',
        ])
        io.stdout(table([header, ...rows]) + '\n')
      }
      return 0
    }
    case 'revoke': {
      const { positionals } = parse('keys revoke', args, {}, { positionals: 1, what: 'key id' })
      const id = keyIdArgument(positionals[0] ?? '', 'keys revoke')
      const config = loadConfig(io.env, io.cwd)
      const revoked = await withStorage(config, io, (storage) => keysService(storage, config).revoke(id))
      if (revoked === undefined) {
        io.stderr(`petstore: no API key has id "${id}" (see: petstore keys list)\n`)
        return 1
      }
      const { key, already } = revoked
      io.stdout(
        already
          ? `API key ${key.id} "${key.name}" was already revoked (at ${iso(key.revokedAt)}); nothing changed.\n`
          : `Revoked API key ${key.id} "${key.name}" (revoked at ${iso(key.revokedAt)}).\n`,
      )
      return 0
    }
    case 'rotate': {
      const { values, positionals } = parse(
        'keys rotate',
        args,
        { grace: { type: 'string' }, json: { type: 'boolean' } },
        { positionals: 1, what: 'key id' },
      )
      const id = keyIdArgument(positionals[0] ?? '', 'keys rotate')
      const graceMs = parseDuration(values.grace ?? DEFAULT_GRACE, { option: '--grace', topic: 'keys rotate', zero: true })
      const config = loadConfig(io.env, io.cwd)
      const rotated = await withStorage(config, humanOutput(io, values.json), (storage) =>
        keysService(storage, config).rotate(id, graceMs),
      )
      if ('refused' in rotated) {
        io.stderr(`petstore: ${rotationRefusal(id, rotated)}\n`)
        return 1
      }
      const { key, secret, old } = rotated
      if (values.json === true) {
        io.stdout(JSON.stringify({ ...describeKey(key), key: secret, replaces: describeKey(old) }) + '\n')
      } else {
        io.stdout(
          `Rotated API key ${old.id} "${old.name}": the new key is ${key.id} for ${key.environment}, scopes ${key.scopes.join(',')}` +
            `${key.expiresAt === null ? '' : `, expires ${iso(key.expiresAt)}`}.\n` +
            `The old key ${old.id} works until ${iso(old.expiresAt)}, then is refused.\n` +
            'Store the new key now: it is shown only once.\n' +
            `${secret}\n`,
        )
      }
      return 0
    }
    case undefined:
      throw new UsageError('keys needs a command: create, list, revoke or rotate', 'keys')
    default:
      throw new UsageError(`unknown keys command "${sub}"`, 'keys')
  }
}

async function deprecationsCommand(args: string[], io: CliIo): Promise<0> {
  const { values } = parse('deprecations', args, { json: { type: 'boolean' } })
  const config = loadConfig(io.env, io.cwd)
  const report = await withStorage(config, humanOutput(io, values.json), (storage) =>
    createDeprecationsService({ deprecations: storage.deprecations, clock: systemClock }).report(
      getPetSchema.operationId,
      GET_PET_SUNSET,
    ),
  )
  const keys = report.callers.map((caller) => ({
    id: caller.keyId,
    name: caller.keyName,
    calls: caller.calls,
    firstSeen: iso(caller.firstSeen),
    lastSeen: iso(caller.lastSeen),
  }))
  if (values.json === true) {
    const { operation, sunset, sunsetPassed, daysLeft } = report
    io.stdout(JSON.stringify({ operation, sunset: sunset.toISOString(), sunsetPassed, daysLeft, keys }, null, 2) + '\n')
    return 0
  }
  const sunset = report.sunset.toISOString()
  io.stdout(
    report.sunsetPassed
      ? `getPet (GET /v1/pets/{petId}) passed its sunset on ${sunset} (0 days left): it answers 410 Gone.\n`
      : `getPet (GET /v1/pets/{petId}) is deprecated: sunset ${sunset}, ${report.daysLeft} day${report.daysLeft === 1 ? '' : 's'} left.\n`,
  )
  if (keys.length === 0) {
    io.stdout('No key has called it.\n')
    return 0
  }
  const header = ['KEY ID', 'NAME', 'CALLS', 'FIRST SEEN', 'LAST SEEN']
  // A key that no longer exists still shows its id: its counts outlive it.
  const rows = keys.map((k) => [k.id, k.name ?? '(unknown key)', String(k.calls), k.firstSeen ?? '-', k.lastSeen ?? '-'])
  io.stdout(table([header, ...rows]) + '\n')
  return 0
}

/**
 * Reports progress on stderr: on a terminal one line redrawn in place, otherwise a line at each
 * tenth, so that a log file gets a few lines rather than thousands.
 */
function progressReporter(io: CliIo, label: string, unit: string): { update: (done: number, total: number) => void; end: () => void } {
  let lastTenth = -1
  let drawn = false
  return {
    update(done, total) {
      const percent = total === 0 ? 100 : Math.floor((done / total) * 100)
      const text = `${label}: ${percent}% (${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} ${unit})`
      if (io.interactive === true) {
        io.stderr(`\r${text}`)
        drawn = true
      } else if (Math.floor(percent / 10) > lastTenth) {
        lastTenth = Math.floor(percent / 10)
        io.stderr(`${text}\n`)
      }
    },
    end() {
      if (drawn) io.stderr('\n')
    },
  }
}

async function backupCommand(args: string[], io: CliIo): Promise<0 | 1 | 2> {
  const { values, positionals } = parse('backup', args, { force: { type: 'boolean' } }, { positionals: 1, what: 'file to write' })
  const config = loadConfig(io.env, io.cwd)
  const { database } = config
  if (database.engine !== 'sqlite') {
    io.stderr(
      'petstore: backup copies the SQLite store; on PostgreSQL use pg_dump, e.g.\n' +
        '  pg_dump --format=custom --file=petstore.dump "$DATABASE_URL"\n' +
        'and pg_restore to restore it.\n',
    )
    return 2
  }
  const target = path.resolve(io.cwd, positionals[0] ?? '')
  if (target === database.path) throw new UsageError('the backup file must not be the database itself', 'backup')
  if (fs.existsSync(target) && values.force !== true) {
    io.stderr(`petstore: ${target} already exists; pass --force to overwrite it\n`)
    return 1
  }
  if (!fs.existsSync(database.path)) {
    io.stderr(`petstore: there is no SQLite database at ${database.path} to back up (see DATABASE_URL)\n`)
    return 1
  }
  // Written beside the target and renamed into place: the target is a whole backup or untouched.
  const partial = `${target}.partial-${process.pid}`
  const progress = progressReporter(io, 'Backing up', 'pages')
  const startedAt = new Date()
  const storage = await openStorage(database)
  io.stderr(`${describeDatabase(database, io.cwd, false)}\n`)
  try {
    if (storage.backup === undefined) throw new Error('this engine has no backup')
    await storage.backup(partial, progress.update)
    progress.end()
    fs.renameSync(partial, target)
  } catch (error) {
    progress.end()
    fs.rmSync(partial, { force: true })
    throw error
  } finally {
    await storage.close()
  }
  const bytes = fs.statSync(target).size
  io.stdout(`Backed up the database as of ${startedAt.toISOString()} to ${target} (${(bytes / 1_048_576).toFixed(1)} MiB).\n`)
  return 0
}

/** The database an option names, in DATABASE_URL's form; a malformed one is a usage error. */
function databaseOption(io: CliIo, option: string, url: string): Config {
  try {
    return loadConfig({ ...io.env, DATABASE_URL: url }, io.cwd)
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

async function copyCommand(args: string[], io: CliIo): Promise<0 | 1> {
  const { values } = parse('copy', args, { from: { type: 'string' }, to: { type: 'string' } })
  if (values.from === undefined) throw new UsageError('--from is required: the URL of the database to copy', 'copy')
  if (values.to === undefined) throw new UsageError('--to is required: the URL of the empty database to copy into', 'copy')
  const from = databaseOption(io, '--from', values.from).database
  const target = databaseOption(io, '--to', values.to)
  if (sameDatabase(from, target.database)) throw new UsageError('--from and --to name the same database', 'copy')
  if (from.engine === 'sqlite' && !fs.existsSync(from.path)) {
    io.stderr(`petstore: there is no SQLite database at ${from.path} to copy (see --from)\n`)
    return 1
  }
  // Opened, never migrated: the copy does not write to its source, which may be serving.
  const source = await openStorage(from)
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

function help(io: CliIo, topic: Topic): 0 {
  io.stdout(HELP[topic] + '\n')
  return 0
}

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h'

/** The help topic `args` name (`keys rotate`, `serve`, …), or undefined if they name none. */
function topicOf(args: string[]): Topic | undefined {
  const [command, sub] = args
  if (command === 'keys' && sub !== undefined && !sub.startsWith('-')) {
    const topic = `keys ${sub}`
    return topic in HELP ? (topic as Topic) : undefined
  }
  return command !== undefined && command !== 'main' && command in HELP ? (command as Topic) : undefined
}

/** Runs one CLI command. Only the bin script touches `process`. */
export async function main(argv: string[], io: CliIo): Promise<CliOutcome> {
  const [command, ...rest] = argv
  try {
    if (command === undefined) {
      // Asked for nothing: a mistake like any other usage error, so a script that forgot its command fails.
      io.stderr(`${HELP.main}\n`)
      return 2
    }
    if (isHelp(command)) return help(io, 'main')
    if (command === 'help') {
      if (rest.length === 0) return help(io, 'main')
      const topic = topicOf(rest)
      if (topic === undefined) throw new UsageError(`no help on "${rest.join(' ')}"`)
      return help(io, topic)
    }
    const topic = topicOf(argv)
    if (topic === undefined) {
      if (command === 'keys') throw new UsageError(`unknown keys command "${rest[0] ?? ''}"`, 'keys')
      throw new UsageError(`unknown command "${command}"`)
    }
    // --help anywhere (before a `--`) wins over every other option, valid or not.
    const end = argv.indexOf('--')
    if ((end === -1 ? argv : argv.slice(0, end)).some(isHelp)) return help(io, topic)

    switch (command) {
      case 'serve': {
        const { values } = parse('serve', rest, { workers: { type: 'string' } })
        const workers = parseWorkers(values.workers)
        if (workers === undefined) {
          throw new UsageError(`--workers must be a number from 1 to 256 or "auto", got "${values.workers}"`, 'serve')
        }
        const config = loadConfig(io.env, io.cwd)
        const logger = createLogger(config)
        if (!isWorker()) stopWithNpm(io.env, logger)
        if (workers > 1 && !isWorker()) {
          await runPrimary(config, logger, workers)
          return 'serving'
        }
        // Workers skip migrations: their primary applied them before forking.
        const server = await startServer(config, logger, { migrate: !isWorker(), tracing: io.tracing })
        closeOnSignals(server, config, logger, { worker: isWorker() })
        return 'serving'
      }
      case 'migrate': {
        parse('migrate', rest, {})
        const applied = await withStorage(loadConfig(io.env, io.cwd), io, async (_storage, applied) => applied)
        io.stdout(applied.length === 0 ? 'Database is up to date.\n' : `Applied: ${applied.join(', ')}\n`)
        return 0
      }
      case 'openapi': {
        parse('openapi', rest, {})
        const config = loadConfig(io.env, io.cwd)
        const document = await withStorage({ ...config, database: { engine: 'sqlite', path: ':memory:' } }, undefined, async (storage) => {
          const app = await buildApp({ config, storage, logger: createLogger({ logLevel: 'silent' }) })
          await app.ready()
          const spec = app.swagger()
          await app.close()
          return spec
        })
        io.stdout(JSON.stringify(document, null, 2) + '\n')
        return 0
      }
      case 'deprecations':
        return await deprecationsCommand(rest, io)
      case 'backup':
        return await backupCommand(rest, io)
      case 'copy':
        return await copyCommand(rest, io)
      default:
        return await keysCommand(rest[0], rest.slice(1), io)
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`petstore: ${error.message}\nRun "petstore ${error.topic === undefined ? '' : `${error.topic} `}--help" for usage.\n`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.stderr(`petstore: invalid configuration: ${redactKeys(error.message)}\n`)
      return 1
    }
    // A failure, not a bug report: one line, never a stack trace.
    io.stderr(`petstore: ${redactKeys(error instanceof Error ? error.message : String(error))}\n`)
    return 1
  }
}
