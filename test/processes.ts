import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { BIN, tempDir } from './helper.js'

// Real processes for the suites that spawn the CLI: commands run to their end, free ports,
// `petstore serve` up and down, and cleanup.
// Each test file that uses them calls `after(cleanupProcesses)` at its top level.

/** How a process ended. */
export interface ProcessExit {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface ServerProcess {
  child: ChildProcess
  port: number
  baseUrl: string
  /** Resolves once the process has exited, however it ended. */
  exited: Promise<ProcessExit>
  /** Everything the process wrote, for failure messages. */
  output(): string
}

const running = new Set<ChildProcess>()
const dirs: string[] = []

/** Has `child` SIGKILLed by `cleanupProcesses` if it is still running then. */
export function trackChild(child: ChildProcess): ChildProcess {
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

/** A port nobody listens on right now: the kernel picks it, we release it for the server. */
export async function freePort(): Promise<number> {
  const probe = net.createServer()
  probe.listen(0, '127.0.0.1')
  await once(probe, 'listening')
  const { port } = probe.address() as net.AddressInfo
  probe.close()
  await once(probe, 'close')
  return port
}

/** Polls GET /healthz until it answers 200; fails early if the process dies, and after `timeoutMs`. */
export async function waitUntilHealthy(server: ServerProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`server exited before answering /healthz:\n${server.output()}`)
    }
    try {
      const response = await fetch(`${server.baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) })
      if (response.status === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(50)
  }
  throw new Error(`server did not answer /healthz within ${timeoutMs} ms:\n${server.output()}`)
}

/**
 * Runs `petstore serve` in `dir` on a free port of 127.0.0.1 and resolves once it is healthy.
 * Its environment is PATH, HOST, PORT, LOG_LEVEL=warn, SHUTDOWN_TIMEOUT_MS=5000, METRICS_PORT=off (servers
 * running at once would all claim the default metrics port) and OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0 (a busy
 * machine must not turn the answers a test expects into 503 overloaded), each overridden by `env`.
 * `nodeArgs` go to Node itself, before the script.
 */
export async function startServer(
  env: Record<string, string>,
  dir: string,
  args: string[] = [],
  { nodeArgs = [] }: { nodeArgs?: string[] } = {},
): Promise<ServerProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, [...nodeArgs, BIN, 'serve', ...args], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT_MS: '5000',
      METRICS_PORT: 'off',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  trackChild(child)
  let output = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const exited = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  const server: ServerProcess = { child, port, baseUrl: `http://127.0.0.1:${port}`, exited, output: () => output }
  try {
    await waitUntilHealthy(server)
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  return server
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

/** Sends `signal` and waits, bounded, for the process to end; SIGKILLs it if it will not. */
export async function stopServer(
  server: ServerProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 8_000,
): Promise<ProcessExit> {
  server.child.kill(signal)
  try {
    return await within(server.exited, timeoutMs, () => `server did not exit after ${signal}:\n${server.output()}`)
  } catch (error) {
    server.child.kill('SIGKILL')
    throw error
  }
}
