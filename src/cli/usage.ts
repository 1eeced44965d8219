import { type ParseArgsConfig, parseArgs } from 'node:util'
import { redactKeys } from '../shared/redaction.js'

// Reading a command line, shared by every command: strict options, and mistakes as usage errors (exit 2).

/** What `petstore … --help` can be asked about: each command's module holds its text. */
export type Topic =
  | 'main'
  | 'serve'
  | 'migrate'
  | 'backup'
  | 'copy'
  | 'openapi'
  | 'deprecations'
  | 'keys'
  | 'keys create'
  | 'keys list'
  | 'keys revoke'
  | 'keys rotate'

/**
 * A mistake in the command line: exit 2, naming the help of `topic`. Its message may quote what was
 * typed, so a key pasted where it does not belong is redacted from it.
 */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly topic?: Topic,
  ) {
    super(redactKeys(message))
  }
}

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
      // "Ambiguous": the next argument is another option (`--name --json`), so the value is missing.
      return /argument missing|argument is ambiguous/.test(error.message) ? `${option} needs a value` : `${option} takes no value`
    }
  }
  return error.message.replace(/\s*\n\s*/g, ' ')
}

/**
 * `--expires-in -1d`, `--workers -1`: a value that begins with a dash, but is none of the command's options,
 * is passed as the option's value, so that the option's own check says what is wrong with it. parseArgs
 * would call it ambiguous, and `--name --json` still is: a value is missing there.
 */
function attachDashValues(args: string[], options: NonNullable<ParseArgsConfig['options']>): string[] {
  const isOption = (arg: string) =>
    arg === '--' ||
    (arg.startsWith('--') ? (arg.slice(2).split('=')[0] ?? '') in options : Object.values(options).some((o) => arg === `-${o.short ?? ''}`))
  const attached: string[] = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? ''
    const next = args[i + 1]
    if (arg === '--') return [...attached, ...args.slice(i)]
    const option = /^--([^=]+)$/.exec(arg)?.[1]
    if (option !== undefined && options[option]?.type === 'string' && next?.startsWith('-') === true && !isOption(next)) {
      attached.push(`${arg}=${next}`)
      i++
    } else {
      attached.push(arg)
    }
  }
  return attached
}

/** Parses the options of `topic` strictly; exactly `positionals` arguments besides them (none by default). */
export function parse<const O extends NonNullable<ParseArgsConfig['options']>>(
  topic: Topic,
  args: string[],
  options: O,
  { positionals = 0, what = 'argument' }: { positionals?: number; what?: string } = {},
) {
  let parsed
  try {
    const all = { ...helpOption, ...options }
    parsed = parseArgs({ args: attachDashValues(args, all), options: all, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(parseArgsMistake(error as NodeJS.ErrnoException), topic)
  }
  if (parsed.positionals.length > positionals) {
    throw new UsageError(`unexpected argument "${parsed.positionals[positionals] ?? ''}"`, topic)
  }
  if (parsed.positionals.length < positionals) throw new UsageError(`${topic} needs a ${what}`, topic)
  return parsed
}
