import { type CliIo, humanOutput, iso, table, withStorage } from '../cli/output.js'
import { type Topic, UsageError, parse } from '../cli/usage.js'
import { systemClock } from '../shared/clock.js'
import { type Config, loadConfig } from '../config.js'
import type { Storage } from '../repositories.js'
import { containsKey } from '../shared/redaction.js'
import { KEY_ID_PREFIX } from './api-keys.format.js'
import type { ApiKey } from './api-keys.repository.js'
import { SCOPES, type Scope, parseScopes, scopesAndOperations } from './api-keys.scopes.js'
import { KEY_NAME_MAX_LENGTH, type KeyNameRefusal, type RotationRefusal, checkKeyName, createApiKeysService } from './api-keys.service.js'

export const KEYS_HELP = {
  keys: `Usage: petstore keys <create|list|revoke|rotate> [options]

Run "petstore keys <command> --help" for the options of each.`,
  'keys create': `Usage: petstore keys create --name NAME [--scope SCOPES] [--expires-in DURATION] [--json]

Creates an API key for the environment of PETSTORE_ENV and prints it once: the key alone is
the last line of output (or, with --json, the "key" member). Only its SHA-256 hash is kept.
  --name NAME            Who or what the key is for (1-${KEY_NAME_MAX_LENGTH} characters on one line)
  --scope SCOPES         What it may do, comma-separated: ${scopesAndOperations().join(',\n                         ')}. Default ${SCOPES.join(',')}
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

const DURATION_UNITS_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
const MAX_LIFETIME_MS = 10 * 365 * 86_400_000

/** `30m`, `12h`, `90d`, `4w` (and `0` if `zero`) in milliseconds, at most 10 years; anything else is a usage error naming `option`. */
function parseDuration(
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

/** `--name`, as the service takes it: a usage error saying what is wrong with it. */
function nameOption(given: string | undefined): string {
  const checked = checkKeyName(given ?? '')
  if ('name' in checked) return checked.name
  throw new UsageError(nameRefusal(checked), 'keys create')
}

function nameRefusal(refusal: KeyNameRefusal): string {
  switch (refusal.refused) {
    case 'length':
      return `--name is required: 1 to ${KEY_NAME_MAX_LENGTH} characters`
    case 'key':
      return '--name must not hold an API key; name the key after who or what uses it'
    case 'unprintable': {
      const code = `U+${(refusal.character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`
      return `--name must be printable text on one line; character ${refusal.index + 1} is a control character (${code})`
    }
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

const keysService = (storage: Storage, config: Config) =>
  createApiKeysService({ apiKeys: storage.apiKeys, clock: systemClock, environment: config.environment })

async function createCommand(args: string[], io: CliIo): Promise<0> {
  const { values } = parse('keys create', args, {
    name: { type: 'string' },
    scope: { type: 'string', multiple: true },
    'expires-in': { type: 'string' },
    json: { type: 'boolean' },
  })
  const name = nameOption(values.name)
  const scopes = scopesOption(values.scope)
  const expiresInMs = values['expires-in'] === undefined ? undefined : parseDuration(values['expires-in'], { topic: 'keys create' })
  const config = loadConfig(io.env, io.cwd)
  const { key, secret } = await withStorage(
    config,
    humanOutput(io, values.json),
    (storage) => keysService(storage, config).create({ name, expiresInMs, scopes }),
    { warnings: io },
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

async function listCommand(args: string[], io: CliIo): Promise<0> {
  const { values } = parse('keys list', args, { json: { type: 'boolean' } })
  const config = loadConfig(io.env, io.cwd)
  const keys = (
    await withStorage(config, humanOutput(io, values.json), (storage) => keysService(storage, config).list(), { warnings: io })
  ).map(describeKey)
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

async function revokeCommand(args: string[], io: CliIo): Promise<0 | 1> {
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

async function rotateCommand(args: string[], io: CliIo): Promise<0 | 1> {
  const { values, positionals } = parse(
    'keys rotate',
    args,
    { grace: { type: 'string' }, json: { type: 'boolean' } },
    { positionals: 1, what: 'key id' },
  )
  const id = keyIdArgument(positionals[0] ?? '', 'keys rotate')
  const graceMs = parseDuration(values.grace ?? DEFAULT_GRACE, { option: '--grace', topic: 'keys rotate', zero: true })
  const config = loadConfig(io.env, io.cwd)
  const rotated = await withStorage(
    config,
    humanOutput(io, values.json),
    (storage) => keysService(storage, config).rotate(id, graceMs),
    { warnings: io },
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

export async function keysCommand(sub: string | undefined, args: string[], io: CliIo): Promise<0 | 1> {
  switch (sub) {
    case 'create':
      return createCommand(args, io)
    case 'list':
      return listCommand(args, io)
    case 'revoke':
      return revokeCommand(args, io)
    case 'rotate':
      return rotateCommand(args, io)
    case undefined:
      throw new UsageError('keys needs a command: create, list, revoke or rotate', 'keys')
    default:
      throw new UsageError(`unknown keys command "${sub}"`, 'keys')
  }
}
