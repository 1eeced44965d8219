import fs from 'node:fs'
import path from 'node:path'
import type { Config, DatabaseConfig } from '../config.js'
import { type Storage, openMigratedStorage } from '../repositories.js'
import { UNPRINTABLE } from '../shared/unprintable.js'
import type { StorageLog } from '../storage/database.js'
import type { Tracing } from '../tracing/tracing.js'

// What every command shares beyond its arguments: where it writes, how it prints for people, the database it opens.

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

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString()
}

/** Columns padded to their widest cell; a cell's unprintable characters are shown escaped (`\n`, `\u001b`). */
export function table(cells: string[][]): string {
  const rows = cells.map((row) => row.map((cell) => (UNPRINTABLE.test(cell) ? JSON.stringify(cell).slice(1, -1) : cell)))
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n')
}

/**
 * Which database a command opened, for people: run from another folder, the default
 * `./data/petstore.db` is another database than the running server's, and a key made there is refused.
 */
export function describeDatabase(database: DatabaseConfig, cwd: string, created: boolean, lead = 'Using'): string {
  if (database.engine === 'sqlite') {
    const relative = path.relative(cwd, database.path)
    const shown = relative.startsWith('..') || path.isAbsolute(relative) ? database.path : `./${relative}`
    return `${lead} SQLite database ${shown}${created ? ' (created)' : ''}`
  }
  const { name, host } = postgresDatabase(database.url)
  return `${lead} PostgreSQL database ${name} on ${host}`
}

/** The database a PostgreSQL URL names, and its server: never the password. */
export function postgresDatabase(text: string): { name: string; host: string } {
  const url = new URL(text)
  const name = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  return { name, host: `${url.hostname}:${url.port || '5432'}` }
}

/**
 * Where a command says which database it opened: to a person, on stderr (stdout stays the command's
 * result, for scripts), and not at all with --json.
 */
export function humanOutput(io: CliIo, json?: boolean): CliIo | undefined {
  return json === true ? undefined : io
}

/**
 * Opens the database, brings it up to date (creating it if needed), runs `work`, closes it. `output`
 * (see humanOutput) first gets the line naming the database; `warnings` (`output` unless given: pass the
 * command's io where --json silences `output`) hears what the operator should know, on stderr.
 */
export async function withStorage<T>(
  config: Config,
  output: CliIo | undefined,
  work: (storage: Storage, applied: string[]) => Promise<T>,
  { lead = 'Using', named = 'DATABASE_URL', warnings = output }: { lead?: string; named?: string; warnings?: CliIo } = {},
): Promise<T> {
  const { database } = config
  const created = database.engine === 'sqlite' && !fs.existsSync(database.path)
  const log = warnings === undefined ? undefined : cliLog(warnings)
  const { storage, applied } = await openMigratedStorage(database, named, log)
  output?.stderr(`${describeDatabase(database, output.cwd, created, lead)}\n`)
  try {
    return await work(storage, applied)
  } finally {
    await storage.close()
  }
}

/** What the storage has to tell an operator, as the CLI's lines on stderr. */
function cliLog(io: CliIo): StorageLog {
  return {
    warn: (message) => io.stderr(`petstore: warning: ${message}\n`),
    error: (message) => io.stderr(`petstore: ${message}\n`),
  }
}

/**
 * Reports progress on stderr: on a terminal one line redrawn in place, otherwise a line at each
 * tenth, so that a log file gets a few lines rather than thousands.
 */
export function progressReporter(io: CliIo, label: string, unit: string): { update: (done: number, total: number) => void; end: () => void } {
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
