// What the soak (scripts/soak.ts) and the benchmark (bench/run.ts) both do with a `petstore`
// process they start: a key for it, its memory, the end of its log.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'

export const ROOT = path.resolve(import.meta.dirname, '..')
export const BIN = path.join(ROOT, 'bin', 'petstore.js')

/** A new API key in the database of `env`, through the CLI as an operator would make one. */
export async function createKey(env: Record<string, string>, name: string): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'keys', 'create', '--name', name, '--json'], {
    cwd: ROOT,
    env,
    timeout: 30_000,
  })
  const key = (JSON.parse(stdout) as { key?: unknown }).key
  if (typeof key !== 'string') throw new Error(`keys create --json printed no key:\n${stdout}`)
  return key
}

/** A line of `/proc/<pid>/status`, in KiB: `VmRSS` (resident now) or `VmHWM` (the peak so far). */
export function procStatusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (match?.[1] === undefined) throw new Error(`no ${field} in /proc/${pid}/status`)
  return Number(match[1])
}

/** The last `lines` lines of a log, read from its last 16 KiB only (a long run's log is large). */
export function logTail(logPath: string, lines = 20): string {
  try {
    const size = fs.statSync(logPath).size
    const buffer = Buffer.alloc(Math.min(size, 16_384))
    const fd = fs.openSync(logPath, 'r')
    try {
      fs.readSync(fd, buffer, 0, buffer.length, size - buffer.length)
    } finally {
      fs.closeSync(fd)
    }
    return buffer.toString('utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}

export function round(value: number, digits = 0): number {
  const factor = 10 ** digits
  return Math.round(value * factor) / factor
}
