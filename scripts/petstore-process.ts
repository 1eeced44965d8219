// One harness for running `petstore` as a real process, shared by the tools that need one (the benchmark
// and its soak, bench/) and by the tests that spawn it (test/processes.ts): free ports,
// `petstore serve` up, ready and down (SIGTERM, then SIGKILL), a key, memory and the end of a log.
// It lives with the tools, not under test/, because tools never import from test/; tests may import it.
// Nothing here tracks processes: each caller keeps what it started and cleans up in its own way.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'

export const ROOT = path.resolve(import.meta.dirname, '..')
export const BIN = path.join(ROOT, 'bin', 'petstore.js')

/** How a process ended. */
export interface ProcessExit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** A Node process started by `spawnNode`, with its exit recorded. */
export interface NodeProcess {
  /** As failure messages name it. */
  name: string
  child: ChildProcess
  pid: number
  /** Resolves once the process has exited, however it ended. */
  exited: Promise<ProcessExit>
  /** Set once the process has exited. */
  exit?: ProcessExit
  /** What the process wrote, for failure messages: all of it when piped, the end of its log file otherwise. */
  output(): string
}

/** A `petstore serve` started by `startPetstore`. */
export interface PetstoreProcess extends NodeProcess {
  port: number
  baseUrl: string
}

/**
 * Where free ports are picked: below the kernel's ephemeral range (`ip_local_port_range`, 32768-60999 by default),
 * from which it gives ports to every `connect()` and `listen(0)`. A port picked there and released can be taken
 * by any process's outgoing connection before the server binds it (`bind EADDRINUSE` beside a test that opens
 * thousands); one below the range is only ever taken by an explicit bind. Undefined where the range starts too
 * low to leave room, or cannot be read: the kernel picks then.
 */
function pickedPorts(): { from: number; to: number } | undefined {
  let low = Number.NaN
  try {
    low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0])
  } catch {
    // Not Linux: the kernel picks.
  }
  if (!Number.isInteger(low) || low <= 8_192) return undefined
  return { from: Math.min(10_000, Math.floor(low / 2)), to: low - 1 }
}

/** Whether `port` (0: one the kernel picks) can be listened on at 127.0.0.1 now; the port it got, or undefined. */
async function listenable(port: number): Promise<number | undefined> {
  const probe = net.createServer()
  const listening = await new Promise<boolean>((resolve) => {
    probe.once('error', () => resolve(false))
    probe.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(true))
  })
  if (!listening) return undefined
  const bound = (probe.address() as net.AddressInfo).port
  probe.close()
  await once(probe, 'close')
  return bound
}

/**
 * Claims `port` for as long as this process lives: false if this or another process has it. A port is free
 * from its pick until its server binds it, a second or so later, and the test files run side by side: two
 * picking the same one meanwhile start two servers on it, and one's requests reach the other. The claim is
 * a name in Linux's abstract socket namespace, which only one socket can have and the kernel frees when
 * the process ends, however it ends.
 */
export async function claimPort(port: number): Promise<boolean> {
  const claim = net.createServer()
  const claimed = await new Promise<boolean>((resolve) => {
    // Any other failure is a system without the namespace: nothing to claim there, and no reason to refuse.
    claim.once('error', (error: NodeJS.ErrnoException) => resolve(error.code !== 'EADDRINUSE'))
    claim.listen(`\0petstore-port-${port}`, () => resolve(true))
  })
  // Held without keeping the process alive.
  if (claimed) claim.unref()
  return claimed
}

/** A port nobody listens on right now (see pickedPorts) and no other picker of the run has (claimPort), released for the server. */
export async function freePort(): Promise<number> {
  const range = pickedPorts()
  for (;;) {
    const port = range === undefined ? 0 : range.from + Math.floor(Math.random() * (range.to - range.from + 1))
    if (range !== undefined && !(await claimPort(port))) continue
    const free = await listenable(port)
    if (free !== undefined) return free
  }
}

/** `count` free ports, all different. */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>()
  while (ports.size < count) ports.add(await freePort())
  return [...ports]
}

/** "exit code 0", "killed by SIGKILL", or "running". */
export function describeExit(exit: ProcessExit | undefined): string {
  if (exit === undefined) return 'running'
  return exit.signal === null ? `exit code ${exit.code}` : `killed by ${exit.signal}`
}

export interface SpawnOptions {
  cwd: string
  /** The whole environment: nothing of this shell leaks in unless the caller passes it. */
  env: NodeJS.ProcessEnv
  /** Appends stdout and stderr to this file; without it they are piped and kept in memory. */
  logPath?: string
  /**
   * Its own process group: Ctrl-C in the terminal reaches only the tool, which then sends the one
   * SIGTERM (a second signal would make the server skip its graceful shutdown).
   */
  detached?: boolean
  /** Its descriptor limit (RLIMIT_NOFILE, soft and hard), set by the shell's `ulimit -n` before Node starts. */
  descriptors?: number
  /**
   * A command line that runs `node …args` as its last arguments and execs it, keeping the pid: a sandbox
   * such as a service manager sets up (test/ops/sandbox.ts).
   */
  wrapper?: readonly string[]
}

/** `node …args` (the Node running this code), with its exit recorded and its output kept. */
export function spawnNode(name: string, args: string[], options: SpawnOptions): NodeProcess {
  const log = options.logPath === undefined ? undefined : fs.openSync(options.logPath, 'a')
  const node =
    options.descriptors === undefined
      ? [process.execPath, ...args]
      : // exec: the shell becomes Node, so that the pid and its signals are Node's.
        ['sh', '-c', `ulimit -n ${options.descriptors} && exec "$0" "$@"`, process.execPath, ...args]
  const [command = process.execPath, ...commandArgs] = [...(options.wrapper ?? []), ...node]
  let child: ChildProcess
  try {
    child = spawn(command, commandArgs, {
      cwd: options.cwd,
      env: options.env,
      stdio: log === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', log, log],
      detached: options.detached === true,
    })
  } finally {
    if (log !== undefined) fs.closeSync(log)
  }
  if (child.pid === undefined) throw new Error(`could not start ${name}`)
  let piped = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (piped += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (piped += chunk))
  const logPath = options.logPath
  const started: NodeProcess = {
    name,
    child,
    pid: child.pid,
    exited: new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        started.exit = { code, signal }
        resolve(started.exit)
      })
    }),
    output: () => (logPath === undefined ? piped : logTail(logPath)),
  }
  return started
}

/** When process `pid` started (clock ticks since boot, the 22nd field of its stat), or undefined when none has the pid or off Linux. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command, in parentheses, may hold spaces: the fields are counted from the state, the third.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3]
  } catch {
    return undefined
  }
}

export interface ProcessGroup {
  kill(signal: NodeJS.Signals): void
}

/**
 * The process group that `leader` leads, to end at a cleanup that may come long after the group has ended
 * by itself. Its pid is then free, and a test run that starts thousands of processes (every PostgreSQL
 * connection is one, and its own group's leader) gives it again: a SIGKILL to that group would end a
 * stranger's process. So the group is signalled only while the process with the leader's pid, if any, is
 * the leader itself (its start time, read now, while it runs: in clock ticks, but a pid is given again only
 * once the pids have wrapped around, never within a tick); members that outlive their leader keep its pid
 * from being given again, and are signalled.
 */
export function processGroup(leader: number): ProcessGroup {
  const started = startTimeOf(leader)
  return {
    kill(signal) {
      const now = startTimeOf(leader)
      if (started !== undefined && now !== undefined && now !== started) return
      try {
        process.kill(-leader, signal)
      } catch {
        // The group has ended, as it should have.
      }
    },
  }
}

/** The status `url` answers a GET with, over HTTPS trusting `ca` for an https URL; rejects after `timeoutMs`. */
function statusOf(url: string, { headers, ca, timeoutMs }: { headers: Record<string, string>; ca?: readonly Buffer[]; timeoutMs: number }): Promise<number> {
  return new Promise((resolve, reject) => {
    const sent = (url.startsWith('https:') ? https : http).get(url, { headers, ca: ca === undefined ? undefined : [...ca], agent: false }, (response) => {
      response.resume().once('end', () => resolve(response.statusCode ?? 0))
    })
    sent.once('error', reject)
    sent.setTimeout(timeoutMs, () => sent.destroy(new Error(`no answer within ${timeoutMs} ms`)))
  })
}

/**
 * Polls `url` until it answers 200 (an https URL trusting `ca`); fails early, with the process's output,
 * if it exits, and after `timeoutMs`.
 */
export async function waitUntilReady(
  started: NodeProcess,
  url: string,
  { headers = {}, ca, timeoutMs = 10_000 }: { headers?: Record<string, string>; ca?: readonly Buffer[]; timeoutMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (started.child.exitCode !== null || started.child.signalCode !== null) {
      throw new Error(`${started.name} exited before answering ${new URL(url).pathname}:\n${started.output()}`)
    }
    try {
      if ((await statusOf(url, { headers, ca, timeoutMs: 1_000 })) === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(50)
  }
  throw new Error(`${started.name} did not answer ${new URL(url).pathname} within ${timeoutMs} ms:\n${started.output()}`)
}

export interface StartOptions {
  cwd: string
  /** The environment beyond HOST and PORT (127.0.0.1 and `port`), which it may override. */
  env: Record<string, string>
  /** The API port: a free one unless told, such as a predecessor's that a replacement takes over. */
  port?: number
  /** After `serve`. */
  args?: string[]
  /** To Node itself, before the script. */
  nodeArgs?: string[]
  /** The petstore bin to run: this checkout's unless told (an installed package's). */
  bin?: string
  /** Metrics on a free port of their own, as in production; the default 9464 may be taken. */
  metrics?: boolean
  logPath?: string
  detached?: boolean
  /** Serving HTTPS (TLS_CERT_FILE and TLS_KEY_FILE in `env`): the certificates its certificate chains to. */
  ca?: readonly Buffer[]
  /** How long /healthz may take to answer 200. */
  timeoutMs?: number
  /** Its descriptor limit (see SpawnOptions). */
  descriptors?: number
  /** See SpawnOptions. */
  wrapper?: readonly string[]
}

/**
 * `petstore serve` on a free port of 127.0.0.1 (or `port`), over HTTPS when given `ca`; resolves once GET
 * /healthz answers 200, else SIGKILLs it.
 */
export async function startPetstore(options: StartOptions): Promise<PetstoreProcess> {
  const free = await freePorts((options.port === undefined ? 1 : 0) + (options.metrics === true ? 1 : 0))
  const port = options.port ?? free.shift() ?? 0
  const metricsPort = free.shift()
  const env: Record<string, string> = { HOST: '127.0.0.1', PORT: String(port), ...options.env }
  if (metricsPort !== undefined) env.METRICS_PORT = String(metricsPort)
  const started = spawnNode('petstore serve', [...(options.nodeArgs ?? []), options.bin ?? BIN, 'serve', ...(options.args ?? [])], {
    cwd: options.cwd,
    env,
    logPath: options.logPath,
    detached: options.detached,
    descriptors: options.descriptors,
    wrapper: options.wrapper,
  })
  const scheme = options.ca === undefined ? 'http' : 'https'
  const server: PetstoreProcess = Object.assign(started, { port, baseUrl: `${scheme}://127.0.0.1:${port}` })
  try {
    await waitUntilReady(server, `${server.baseUrl}/healthz`, { ca: options.ca, timeoutMs: options.timeoutMs })
  } catch (error) {
    server.child.kill('SIGKILL')
    throw error
  }
  return server
}

/**
 * Sends `signal` (SIGTERM unless told) and waits for the process to end; SIGKILLs it after `killAfterMs`.
 * `killed` says whether it had to.
 */
export async function stopProcess(
  started: NodeProcess,
  { signal = 'SIGTERM', killAfterMs }: { signal?: NodeJS.Signals; killAfterMs: number },
): Promise<ProcessExit & { killed: boolean }> {
  if (started.exit !== undefined) return { ...started.exit, killed: false }
  started.child.kill(signal)
  let killed = false
  const killer = setTimeout(() => {
    killed = true
    started.child.kill('SIGKILL')
  }, killAfterMs)
  const exit = await started.exited
  clearTimeout(killer)
  return { ...exit, killed }
}

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

/**
 * Creates `count` pets through the API, as clients would, `concurrency` at a time, with the bodies
 * `body(n)`; returns their ids as the server wrote them (as text: an id is an int64).
 */
export async function createPets(
  baseUrl: string,
  key: string,
  { count, concurrency, body, signal }: { count: number; concurrency: number; body: (n: number) => string; signal: AbortSignal },
): Promise<string[]> {
  const ids: string[] = []
  let next = 0
  const writer = async () => {
    while (next < count) {
      const response = await fetch(`${baseUrl}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body(next++),
        signal: AbortSignal.any([signal, AbortSignal.timeout(10_000)]),
      })
      const text = await response.text()
      const id = /"id":(\d+)/.exec(text)?.[1]
      if (response.status !== 201 || id === undefined) throw new Error(`seeding: POST /v1/pets answered ${response.status}: ${text.slice(0, 300)}`)
      ids.push(id)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, writer))
  return ids
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

/** The reason a run was aborted when a signal interrupted it. */
export class Interrupted extends Error {}

/**
 * The last resorts of a tool that runs for minutes: `hardCleanup` on any exit; the first SIGINT, SIGTERM
 * or SIGHUP aborts `stop` with `Interrupted` so the run winds down in order, a second exits 130 at once;
 * past `hardLimitMs` it exits with `timeLimitExitCode`.
 */
export function guardRun(options: {
  name: string
  hardCleanup: () => void
  hardLimitMs: number
  timeLimitExitCode: number
  /** Printed when the time bound is reached. */
  timeLimitMessage: string
}): { stop: AbortController; interrupted: () => boolean } {
  const stop = new AbortController()
  process.on('exit', options.hardCleanup)
  let signalled = false
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (signalled) process.exit(130)
      signalled = true
      console.error(`\n${options.name}: ${signal}: stopping the load and the servers…`)
      stop.abort(new Interrupted(`interrupted by ${signal}`))
    })
  }
  setTimeout(() => {
    console.error(`${options.name}: ${options.timeLimitMessage}`)
    process.exit(options.timeLimitExitCode)
  }, options.hardLimitMs).unref()
  return { stop, interrupted: () => signalled }
}

/** What is wrong with an error answer of `status` whose body is `text`, against the one error shape, or undefined. */
export function errorShape(status: number, text: string): string | undefined {
  try {
    const body = JSON.parse(text) as Record<string, unknown>
    const keys = Object.keys(body).sort().join(',')
    if (keys !== 'code,message,status') return `error body keys ${keys}`
    if (body.status !== status) return `error body status ${String(body.status)} on a ${status}`
    if (typeof body.code !== 'string' || typeof body.message !== 'string' || body.message === '') return 'error body types'
    return undefined
  } catch {
    return `not JSON: ${text.slice(0, 80)}`
  }
}
