import { redactKeys } from './shared/redaction.js'
import { KEYS_HELP, keysCommand } from './api-keys/keys.cli.js'
import { OPENAPI_HELP, openapiCommand } from './cli/openapi.cli.js'
import type { CliIo } from './cli/output.js'
import { SERVE_HELP, serveCommand } from './cli/serve.cli.js'
import { type Topic, UsageError } from './cli/usage.js'
import { ConfigError } from './config.js'
import { COPY_HELP, copyCommand } from './copy/copy.cli.js'
import { DEPRECATIONS_HELP, deprecationsCommand } from './deprecations/deprecations.cli.js'
import { BACKUP_HELP, backupCommand } from './cli/backup.cli.js'
import { MIGRATE_HELP, migrateCommand } from './cli/migrate.cli.js'
import { releaseVersion } from './shared/release.js'

/*
 * The command line's dispatcher: which command runs, its --help, and how a failure becomes an exit code.
 * Each command, with its help text, lives in its own module: the feature's folder where it has one (keys,
 * deprecations, copy), src/cli/ for the rest (serve, migrate, backup, openapi), which belong to no feature.
 */

export type { CliIo } from './cli/output.js'

/** What `main` ends with: an exit code, or `serving` when a server now keeps the process alive. */
export type CliOutcome = 0 | 1 | 2 | 3 | 4 | 'serving'

const HELP = {
  main: `Usage: petstore <command> [options]

Commands:
  serve [--workers N]   Run the HTTP service (migrates the database first)
  migrate [--status]    Apply pending database migrations and exit; --status only reports them
  backup <file>         Copy the SQLite database, while it serves, to a new file
  copy --from URL --to URL
                        Copy every pet, key and record into an empty database (SQLite or PostgreSQL)
  openapi               Print the OpenAPI document
  deprecations          Who still calls the deprecated getPet, and until when
  keys create           Create an API key
  keys list             List API keys
  keys revoke <id>      Revoke an API key
  keys rotate <id>      Replace an API key, the old one working for a grace period
  --version             Print this release's version (semantic versioning) and exit

Configuration comes from environment variables (see README). Run "petstore <command> --help" for more.
Exit codes: 0 success, 1 failure, 2 usage error (migrate --status adds 3 and 4: see its --help).`,
  serve: SERVE_HELP,
  migrate: MIGRATE_HELP,
  backup: BACKUP_HELP,
  copy: COPY_HELP,
  openapi: OPENAPI_HELP,
  deprecations: DEPRECATIONS_HELP,
  ...KEYS_HELP,
} as const satisfies Record<Topic, string>

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
    // Asked for nothing: a mistake like any other usage error, so a script that forgot its command fails.
    if (command === undefined) throw new UsageError('no command given: serve, migrate, backup, copy, openapi, deprecations or keys')
    if (isHelp(command)) return help(io, 'main')
    if (command === '--version') {
      if (rest.length > 0) throw new UsageError(`--version takes nothing more, got "${rest.join(' ')}"`)
      io.stdout(`${releaseVersion()}\n`)
      return 0
    }
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
      case 'serve':
        return await serveCommand(rest, io)
      case 'migrate':
        return await migrateCommand(rest, io)
      case 'openapi':
        return await openapiCommand(rest, io)
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
    // A failure, not a bug report: one line, never a stack trace, but with every cause's reason.
    io.stderr(`petstore: ${redactKeys(reasons(error))}\n`)
    return 1
  }
}

/** An error's message followed by its causes' ("Database migration failed: …"), each once. */
function reasons(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const messages: string[] = []
  for (let at: unknown = error; at instanceof Error && messages.length < 5; at = at.cause) {
    // A cause that its wrapper already quotes ("cannot reach …: connect ECONNREFUSED …") is said once.
    if (at.message !== '' && !messages.some((message) => message.includes(at.message))) messages.push(at.message)
  }
  return messages.join(': ')
}
