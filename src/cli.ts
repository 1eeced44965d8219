import { redactKeys } from './shared/redaction.js'
import type { CliIo } from './cli/output.js'
import { type Topic, UsageError } from './cli/usage.js'
import { ConfigError } from './config.js'
import { releaseVersion } from './shared/release.js'

/*
 * The command line's dispatcher: which command runs, its --help, and how a failure becomes an exit code.
 * Each command, with its help text, lives in its own module: the feature's folder where it has one (keys,
 * deprecations, copy), src/cli/ for the rest (serve, migrate, backup, openapi), which belong to no feature.
 * A command's module is loaded only when it runs or its help is asked for: the server's libraries are
 * most of a process's start-up, which `keys list` or `migrate` has no use for.
 */

export type { CliIo } from './cli/output.js'

/** What `main` ends with: an exit code, or `serving` when a server now keeps the process alive. */
export type CliOutcome = 0 | 1 | 2 | 3 | 4 | 'serving'

const MAIN_HELP = `Usage: petstore <command> [options]

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
Exit codes: 0 success, 1 failure, 2 usage error (migrate --status adds 3 and 4: see its --help).`

/** A command, as its module gives it: its help by topic (keys has one per subcommand) and what runs it. */
interface Command {
  help: Partial<Record<Topic, string>>
  run(args: string[], io: CliIo): Promise<CliOutcome>
}

const COMMANDS = {
  serve: async () => {
    const { SERVE_HELP, serveCommand } = await import('./cli/serve.cli.js')
    return { help: { serve: SERVE_HELP }, run: serveCommand }
  },
  migrate: async () => {
    const { MIGRATE_HELP, migrateCommand } = await import('./cli/migrate.cli.js')
    return { help: { migrate: MIGRATE_HELP }, run: migrateCommand }
  },
  backup: async () => {
    const { BACKUP_HELP, backupCommand } = await import('./cli/backup.cli.js')
    return { help: { backup: BACKUP_HELP }, run: backupCommand }
  },
  copy: async () => {
    const { COPY_HELP, copyCommand } = await import('./copy/copy.cli.js')
    return { help: { copy: COPY_HELP }, run: copyCommand }
  },
  openapi: async () => {
    const { OPENAPI_HELP, openapiCommand } = await import('./cli/openapi.cli.js')
    return { help: { openapi: OPENAPI_HELP }, run: openapiCommand }
  },
  deprecations: async () => {
    const { DEPRECATIONS_HELP, deprecationsCommand } = await import('./deprecations/deprecations.cli.js')
    return { help: { deprecations: DEPRECATIONS_HELP }, run: deprecationsCommand }
  },
  keys: async () => {
    const { KEYS_HELP, keysCommand } = await import('./api-keys/keys.cli.js')
    return { help: KEYS_HELP, run: (args, io) => keysCommand(args[0], args.slice(1), io) }
  },
} as const satisfies Record<Exclude<Topic, 'main' | `keys ${string}`>, () => Promise<Command>>

const isCommand = (name: string | undefined): name is keyof typeof COMMANDS => name !== undefined && Object.hasOwn(COMMANDS, name)

function help(io: CliIo, text: string): 0 {
  io.stdout(text + '\n')
  return 0
}

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h'

/** The command `args` name, loaded, and the help of the topic they name (`keys rotate`, `serve`, …); undefined if they name none. */
async function topicOf(args: string[]): Promise<{ command: Command; text: string } | undefined> {
  const [name, sub] = args
  if (!isCommand(name)) return undefined
  const command: Command = await COMMANDS[name]()
  const topic = name === 'keys' && sub !== undefined && !sub.startsWith('-') ? `keys ${sub}` : name
  const text = command.help[topic as Topic]
  return text === undefined ? undefined : { command, text }
}

/** Runs one CLI command. Only the bin script touches `process`. */
export async function main(argv: string[], io: CliIo): Promise<CliOutcome> {
  const [command, ...rest] = argv
  try {
    // Asked for nothing: a mistake like any other usage error, so a script that forgot its command fails.
    if (command === undefined) throw new UsageError('no command given: serve, migrate, backup, copy, openapi, deprecations or keys')
    if (isHelp(command)) return help(io, MAIN_HELP)
    if (command === '--version') {
      if (rest.length > 0) throw new UsageError(`--version takes nothing more, got "${rest.join(' ')}"`)
      io.stdout(`${releaseVersion()}\n`)
      return 0
    }
    if (command === 'help') {
      if (rest.length === 0) return help(io, MAIN_HELP)
      const asked = await topicOf(rest)
      if (asked === undefined) throw new UsageError(`no help on "${rest.join(' ')}"`)
      return help(io, asked.text)
    }
    const asked = await topicOf(argv)
    if (asked === undefined) {
      if (command === 'keys') throw new UsageError(`unknown keys command "${rest[0] ?? ''}"`, 'keys')
      throw new UsageError(`unknown command "${command}"`)
    }
    // --help anywhere (before a `--`) wins over every other option, valid or not.
    const end = argv.indexOf('--')
    if ((end === -1 ? argv : argv.slice(0, end)).some(isHelp)) return help(io, asked.text)
    return await asked.command.run(rest, io)
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
