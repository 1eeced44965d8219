import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import {
  BIN,
  type PetstoreProcess,
  type ProcessExit,
  freePort,
  startPetstore,
  stopProcess,
} from '../scripts/petstore-process.js'
import { tempDir } from './helper.js'

// Real processes for the suites that spawn the CLI: commands run to their end, free ports,
// `petstore serve` up and down, and cleanup: scripts/petstore-process.ts, tracked for cleanup here.
// Each test file that uses them calls `after(cleanupProcesses)` at its top level.

export { freePort, type ProcessExit }

export type ServerProcess = PetstoreProcess

const running = new Set<ChildProcess>()
const dirs: string[] = []

/** Has `child` SIGKILLed by `cleanupProcesses` if it is still running then. */
function trackChild(child: ChildProcess): ChildProcess {
  running.add(child)
  child.once('exit', () => running.delete(child))
  return child
}

/** A fresh temp directory that `cleanupProcesses` removes. */
export function trackedTempDir(prefix: string): string {
  const dir = tempDir(prefix)
  dirs.push(dir)
  return dir
}

/**
 * SIGKILLs every tracked child still running and removes every tracked directory:
 * nothing may outlive the test file, even when a test failed half-way.
 */
export function cleanupProcesses(): void {
  for (const child of running) child.kill('SIGKILL')
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * Runs `petstore serve` in `dir` on a free port of 127.0.0.1 and resolves once it is healthy.
 * Its environment is PATH, HOST, PORT, LOG_LEVEL=warn, SHUTDOWN_TIMEOUT_MS=5000, METRICS_PORT=off (servers
 * running at once would all claim the default metrics port) and OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0 (a busy
 * machine must not turn the answers a test expects into 503 overloaded), each overridden by `env`.
 * `nodeArgs` go to Node itself, before the script; `detached` gives it a process group of its own; with
 * `ca`, it serves HTTPS (TLS_CERT_FILE and TLS_KEY_FILE in `env`) with a certificate chaining to one of them;
 * `port` is the API port instead of a free one (a replacement's, on its predecessor's); `bin` is the petstore
 * bin to run instead of this checkout's (another release's); `descriptors` is its descriptor limit (RLIMIT_NOFILE).
 */
export async function startServer(
  env: Record<string, string>,
  dir: string,
  args: string[] = [],
  {
    nodeArgs = [],
    detached,
    ca,
    port,
    bin,
    descriptors,
  }: { nodeArgs?: string[]; detached?: boolean; ca?: readonly Buffer[]; port?: number; bin?: string; descriptors?: number } = {},
): Promise<ServerProcess> {
  const server = await startPetstore({
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT_MS: '5000',
      METRICS_PORT: 'off',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      ...env,
    },
    args,
    nodeArgs,
    detached,
    ca,
    port,
    bin,
    descriptors,
    // Starting is not what these tests assert: on a machine busy with other work, migrations and
    // --workers forks have taken over 10 s.
    timeoutMs: 30_000,
  })
  trackChild(server.child)
  return server
}

/**
 * Records which modules a process loads: pass `nodeArgs` to Node, then `read()` gives one line per
 * module it resolved, import or require alike, `<url> <url of who asked>`, and `builtins()` the
 * internal modules of Node itself it had loaded when it exited (`process.moduleLoadList`).
 * `reset()` starts over. For tests of what stays unloaded (tracing off, a database with nothing
 * to migrate, undici).
 */
export function recordModules(dir: string): { nodeArgs: string[]; read(): string[]; builtins(): string[]; reset(): void } {
  const hook = path.join(dir, 'record-modules.mjs')
  const loaded = path.join(dir, 'loaded-modules.txt')
  const builtins = path.join(dir, 'loaded-builtins.txt')
  const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n') : [])
  fs.writeFileSync(
    hook,
    `import fs from 'node:fs'
import { registerHooks } from 'node:module'
process.on('exit', () => fs.writeFileSync(${JSON.stringify(builtins)}, process.moduleLoadList.join('\\n')))
registerHooks({
  resolve(specifier, context, next) {
    const result = next(specifier, context)
    fs.appendFileSync(${JSON.stringify(loaded)}, result.url + ' ' + context.parentURL + '\\n')
    return result
  },
})
`,
  )
  return {
    nodeArgs: ['--import', pathToFileURL(hook).href],
    read: () => lines(loaded),
    builtins: () => lines(builtins),
    reset: () => {
      fs.rmSync(loaded, { force: true })
      fs.rmSync(builtins, { force: true })
    },
  }
}

/**
 * Sends `request` until it is answered with something other than 200, and returns that answer; fails if
 * a request sent `withinMs` or more after `since` was still accepted. What the service promises for a key
 * revoked, or rotated without grace, is about when a request is sent, not when a busy machine answers it.
 */
export async function refusedWithin<T extends { status: number }>(
  request: () => Promise<T>,
  { since, withinMs, after }: { since: number; withinMs: number; after: string },
): Promise<T> {
  for (;;) {
    const sentAfter = Date.now() - since
    const answer = await request()
    if (answer.status !== 200) return answer
    if (sentAfter >= withinMs) assert.fail(`a request sent ${sentAfter} ms after ${after} was accepted`)
    await sleep(20)
  }
}

/** How a command run to its end by `runCommand` or `runCli` ended, and everything it wrote. */
export interface CommandRun extends ProcessExit {
  stdout: string
  stderr: string
}

/**
 * Runs `command args` in `cwd` with exactly `env` to its end, tracked (see `trackChild`) and bounded:
 * SIGTERMed after `timeoutMs`. Resolves however it exited, unless `rejectOnFailure` (then a non-zero
 * exit rejects, with its stderr); rejects if it cannot be started.
 */
export function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; rejectOnFailure?: boolean },
): Promise<CommandRun> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: options.timeoutMs ?? 15_000,
  })
  trackChild(child)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => {
      if (options.rejectOnFailure === true && code !== 0) {
        reject(new Error(`${[command, ...args].join(' ')} exited with ${code ?? signal}:\n${stderr}`))
      } else {
        resolve({ code, signal, stdout, stderr })
      }
    })
  })
}

/**
 * `node bin/petstore.js …args` in `cwd`, with only PATH and `env` as its environment, as `runCommand`
 * runs it: bounded (15 s unless `timeoutMs`), tracked, and resolving on any exit unless `rejectOnFailure`.
 */
export function runCli(
  args: string[],
  env: Record<string, string>,
  cwd: string,
  options: { timeoutMs?: number; rejectOnFailure?: boolean } = {},
): Promise<CommandRun> {
  return runCommand(process.execPath, [BIN, ...args], { ...options, cwd, env: { PATH: process.env.PATH ?? '', ...env } })
}

/** `promise`, or a failure naming `what` once `ms` have passed; the timer never outlives the wait. */
export async function within<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what()} (waited ${ms} ms)`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Polls `done` every `everyMs` until it answers true; fails after `ms`, naming `what`. Unlike a loop raced
 * by `within`, nothing is left polling after the failure, holding the test file's process open.
 */
export async function until(done: () => boolean | Promise<boolean>, ms: number, what: () => string, everyMs = 50): Promise<void> {
  const deadline = performance.now() + ms
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`${what()} (waited ${ms} ms)`)
    await sleep(everyMs)
  }
}

/** Sends `signal` and waits, bounded, for the process to end; SIGKILLs it if it will not. */
export async function stopServer(
  server: ServerProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 8_000,
): Promise<ProcessExit> {
  const exit = await stopProcess(server, { signal, killAfterMs: timeoutMs })
  if (exit.killed) throw new Error(`server did not exit after ${signal} (waited ${timeoutMs} ms):\n${server.output()}`)
  return { code: exit.code, signal: exit.signal }
}
