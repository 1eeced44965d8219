import { type ParseArgsConfig, parseArgs } from 'node:util'
import type { ApiKey } from './api-keys/api-keys.repository.js'
import { createApiKeysService } from './api-keys/api-keys.service.js'
import { buildApp } from './app.js'
import { systemClock } from './clock.js'
import { CONFIG_VARIABLES, type Config, ConfigError, loadConfig } from './config.js'
import { createLogger } from './logger.js'
import { isWorker, parseWorkers, runPrimary } from './cluster.js'
import { closeOnSignals, startServer } from './server.js'
import { openMigratedStorage, type Storage } from './storage/storage.js'

export interface CliIo {
  env: Readonly<Record<string, string | undefined>>
  cwd: string
  stdout: (text: string) => void
  stderr: (text: string) => void
}

/** What `main` ends with: an exit code, or `serving` when a server now keeps the process alive. */
export type CliOutcome = 0 | 1 | 2 | 'serving'

class UsageError extends Error {}

const HELP = {
  main: `Usage: petstore <command> [options]

Commands:
  serve [--workers N]   Run the HTTP service (migrates the database first)
  migrate               Apply pending database migrations and exit
  openapi               Print the OpenAPI document
  keys create           Create an API key
  keys list             List API keys
  keys revoke <id>      Revoke an API key

Configuration comes from environment variables (see README). Run "petstore <command> --help" for more.
Exit codes: 0 success, 1 failure, 2 usage error.`,
  serve: `Usage: petstore serve [--workers N|auto]

Runs the HTTP service (applying pending migrations first).
  --workers N   N processes sharing the port (node:cluster); auto = one per core. Default 1.

It reads these environment variables:
${Object.entries(CONFIG_VARIABLES)
  .map(([name, meaning]) => `  ${name.padEnd(22)}${meaning}`)
  .join('\n')}`,
  migrate: 'Usage: petstore migrate\n\nApplies pending migrations to the database of DATABASE_URL (creating it if needed).',
  openapi: 'Usage: petstore openapi\n\nPrints the OpenAPI 3.1 document the service serves at /v1/openapi.json.',
  keys: 'Usage: petstore keys <create|list|revoke> [options]',
  'keys create': `Usage: petstore keys create --name NAME [--expires-in DURATION] [--json]

Creates an API key for the environment of PETSTORE_ENV and prints it once: the key alone is
the last line of output (or, with --json, the "key" member). Only its SHA-256 hash is kept.
  --name NAME            Who or what the key is for (1-100 characters)
  --expires-in DURATION  Lifetime such as 30m, 12h, 90d or 4w; default: never expires
  --json                 Print a JSON object instead of text`,
  'keys list': `Usage: petstore keys list [--json]

Lists keys: id, name, prefix, environment, created, last used, expires, revoked. Never the secret.`,
  'keys revoke': `Usage: petstore keys revoke <id>

Revokes a key; a running server refuses it from its next request on.`,
} as const

const DURATION_UNITS_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
const MAX_LIFETIME_MS = 10 * 365 * 86_400_000

export function parseDuration(text: string): number {
  const match = /^([1-9][0-9]{0,5})([mhdw])$/.exec(text)
  const ms = match === null ? Number.NaN : Number(match[1]) * (DURATION_UNITS_MS[match[2] ?? ''] ?? Number.NaN)
  if (!(ms <= MAX_LIFETIME_MS)) {
    throw new UsageError(`--expires-in must be a positive duration such as 30m, 12h, 90d or 4w, at most 10 years; got "${text}"`)
  }
  return ms
}

const helpOption = { help: { type: 'boolean', short: 'h' } } as const

function parse<const O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
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
    createdAt: iso(key.createdAt),
    lastUsedAt: iso(key.lastUsedAt),
    expiresAt: iso(key.expiresAt),
    revokedAt: iso(key.revokedAt),
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n')
}

/** Opens the database, brings it up to date (creating it if needed), runs `work`, closes it. */
async function withStorage<T>(
  config: Config,
  work: (storage: Storage, applied: string[]) => Promise<T>,
): Promise<T> {
  const { storage, applied } = await openMigratedStorage(config.database)
  try {
    return await work(storage, applied)
  } finally {
    await storage.close()
  }
}

async function keysCommand(sub: string | undefined, args: string[], config: Config, io: CliIo): Promise<0 | 1 | 2> {
  const keysService = (storage: Storage) =>
    createApiKeysService({ apiKeys: storage.apiKeys, clock: systemClock, environment: config.environment })

  switch (sub) {
    case 'create': {
      const { values, positionals } = parse(args, {
        ...helpOption,
        name: { type: 'string' },
        'expires-in': { type: 'string' },
        json: { type: 'boolean' },
      })
      if (values.help === true) return help(io, 'keys create')
      const name = values.name?.trim() ?? ''
      if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`)
      if (name === '' || name.length > 100) throw new UsageError('--name is required: 1 to 100 characters')
      const expiresInMs = values['expires-in'] === undefined ? undefined : parseDuration(values['expires-in'])
      const { key, secret } = await withStorage(config, (storage) => keysService(storage).create({ name, expiresInMs }))
      if (values.json === true) {
        io.stdout(JSON.stringify({ ...describeKey(key), key: secret }) + '\n')
      } else {
        io.stdout(
          `Created API key ${key.id} "${key.name}" for ${key.environment}` +
            `${key.expiresAt === null ? '' : `, expires ${iso(key.expiresAt)}`}.\n` +
            'Store it now: it is shown only once.\n' +
            `${secret}\n`,
        )
      }
      return 0
    }
    case 'list': {
      const { values, positionals } = parse(args, { ...helpOption, json: { type: 'boolean' } })
      if (values.help === true) return help(io, 'keys list')
      if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`)
      const keys = (await withStorage(config, (storage) => keysService(storage).list())).map(describeKey)
      if (values.json === true) {
        io.stdout(JSON.stringify(keys, null, 2) + '\n')
      } else if (keys.length === 0) {
        io.stdout('No API keys yet. Create one with: petstore keys create --name NAME\n')
      } else {
        const header = ['ID', 'NAME', 'PREFIX', 'ENVIRONMENT', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED']
        const rows = keys.map((k) => [
          k.id,
          k.name,
          `${k.prefix}…`,
          k.environment,
          k.createdAt ?? '-',
          k.lastUsedAt ?? 'never',
          k.expiresAt ?? 'never',
          k.revokedAt ?? 'no',
        ])
        io.stdout(table([header, ...rows]) + '\n')
      }
      return 0
    }
    case 'revoke': {
      const { values, positionals } = parse(args, helpOption)
      if (values.help === true) return help(io, 'keys revoke')
      if (positionals.length !== 1) throw new UsageError('keys revoke takes exactly one key id')
      const id = positionals[0] ?? ''
      const key = await withStorage(config, (storage) => keysService(storage).revoke(id))
      if (key === undefined) {
        io.stderr(`petstore: no API key has id "${id}" (see: petstore keys list)\n`)
        return 1
      }
      io.stdout(`Revoked API key ${key.id} "${key.name}" (revoked at ${iso(key.revokedAt)}).\n`)
      return 0
    }
    default:
      if (sub === undefined || sub === '--help' || sub === '-h') return help(io, 'keys')
      throw new UsageError(`unknown keys command "${sub}"`)
  }
}

function help(io: CliIo, topic: keyof typeof HELP): 0 {
  io.stdout(HELP[topic] + '\n')
  return 0
}

/** Runs one CLI command. Only the bin script touches `process`. */
export async function main(argv: string[], io: CliIo): Promise<CliOutcome> {
  const [command, ...rest] = argv
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') return help(io, 'main')
    if (!['serve', 'migrate', 'openapi', 'keys'].includes(command)) throw new UsageError(`unknown command "${command}"`)
    if (rest.includes('--help') || rest.includes('-h')) {
      const topic = command === 'keys' && rest[0] !== undefined ? `keys ${rest[0]}` : command
      return help(io, topic in HELP ? (topic as keyof typeof HELP) : 'main')
    }
    const config = loadConfig(io.env, io.cwd)

    switch (command) {
      case 'serve': {
        const { values } = parse(rest, { ...helpOption, workers: { type: 'string' } })
        const workers = parseWorkers(values.workers)
        if (workers === undefined) throw new UsageError(`--workers must be a number from 1 to 256 or "auto", got "${values.workers}"`)
        const logger = createLogger(config)
        if (workers > 1 && !isWorker()) {
          await runPrimary(config, logger, workers)
          return 'serving'
        }
        // Workers skip migrations: their primary applied them before forking.
        const server = await startServer(config, logger, { migrate: !isWorker() })
        closeOnSignals(server, config, logger, { worker: isWorker() })
        return 'serving'
      }
      case 'migrate': {
        parse(rest, helpOption)
        const applied = await withStorage(config, async (_storage, applied) => applied)
        io.stdout(applied.length === 0 ? 'Database is up to date.\n' : `Applied: ${applied.join(', ')}\n`)
        return 0
      }
      case 'openapi': {
        parse(rest, helpOption)
        const document = await withStorage({ ...config, database: { engine: 'sqlite', path: ':memory:' } }, async (storage) => {
          const app = await buildApp({ config, storage, logger: createLogger({ logLevel: 'silent' }) })
          await app.ready()
          const spec = app.swagger()
          await app.close()
          return spec
        })
        io.stdout(JSON.stringify(document, null, 2) + '\n')
        return 0
      }
      default:
        return await keysCommand(rest[0], rest.slice(1), config, io)
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`petstore: ${error.message}\nRun "petstore --help" for usage.\n`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.stderr(`petstore: invalid configuration: ${error.message}\n`)
      return 1
    }
    io.stderr(`petstore: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}
