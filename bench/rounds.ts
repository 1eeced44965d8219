// The benchmark's load: per scenario a warm-up, then interleaved rounds whose order of servers changes
// from round to round, each measured run a fresh load-generator process (wrk, or load.ts driving
// autocannon), and a stop with what came back when a run saw anything but 2xx.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { type NodeProcess, ROOT, describeExit, round } from '../scripts/petstore-process.js'
import type { LoadOptions, LoadResult, LoadTool } from './load.js'
import { type CompanionId, type EngineName, type PerServer, type Round, type ScenarioReport, roundRatios, roundsSettle, targetsOf } from './report.js'
import { CONNECTIONS, type Scenario, petBody } from './scenarios.js'
import { parseWrk, wrkArgs, wrkScript } from './wrk.js'

/** Load generators running now; they end by themselves, but not before the hard time bound would. */
const loadGenerators = new Set<ChildProcess>()

/** The last resort on exit: load generators are detached, so nothing else would end them. */
export function killLoadGenerators(): void {
  for (const child of loadGenerators) child.kill('SIGKILL')
}

/** Clock ticks per second, the unit of /proc's CPU times. */
let ticksPerSecond: number | undefined

const ticksToUs = (ticks: number) => {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  return (ticks * 1e6) / ticksPerSecond
}

/** /proc/<pid>/stat's fields after the command, which may itself hold ") ": ppid is [1], utime [11], cutime [13]. */
const statFields = (pid: number | string) => fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1)?.split(' ') ?? []

/** The CPU time a process has used so far, user and system, all its threads (exited ones included), in µs. */
function processCpuUs(pid: number): number {
  const fields = statFields(pid)
  return ticksToUs(Number(fields[11]) + Number(fields[12]))
}

/**
 * CPU time used so far, in µs: by the whole machine (every core, time stolen by the hypervisor included),
 * and by the bench, this process and all its descendants (servers, load generators, the PostgreSQL server
 * and its backends; those that exited through their parents' counts of reaped children).
 */
export function cpuInUse(): { machineUs: number; benchUs: number } {
  const [user, nice, system, , , irq, softirq, steal] = (/^cpu\s+(.*)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))?.[1] ?? '').split(/\s+/).map(Number)
  const cpuTicks = new Map<number, number>()
  const children = new Map<number, number[]>()
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let fields: string[]
    try {
      fields = statFields(name)
    } catch {
      continue // it exited meanwhile
    }
    const pid = Number(name)
    const parent = Number(fields[1])
    cpuTicks.set(pid, Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]))
    const siblings = children.get(parent)
    if (siblings === undefined) children.set(parent, [pid])
    else siblings.push(pid)
  }
  let benchTicks = 0
  const pending = [process.pid]
  for (let pid = pending.pop(); pid !== undefined; pid = pending.pop()) {
    benchTicks += cpuTicks.get(pid) ?? 0
    pending.push(...(children.get(pid) ?? []))
  }
  const machineTicks = [user, nice, system, irq, softirq, steal].reduce<number>((sum, ticks) => sum + (ticks ?? 0), 0)
  return { machineUs: ticksToUs(machineTicks), benchUs: ticksToUs(benchTicks) }
}

/** One load-generator process, stopped by the run's abort or when it outlives its duration by far. */
async function spawnLoadGenerator(
  command: string,
  args: string[],
  durationS: number,
  signal: AbortSignal,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  loadGenerators.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const stop = () => child.kill('SIGTERM')
  signal.addEventListener('abort', stop, { once: true })
  const killer = setTimeout(() => child.kill('SIGKILL'), (durationS + 30) * 1000)
  const code = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null))
    child.once('exit', (exitCode) => resolve(exitCode))
  })
  loadGenerators.delete(child)
  clearTimeout(killer)
  signal.removeEventListener('abort', stop)
  signal.throwIfAborted()
  return { code, stdout, stderr }
}

/**
 * One run against one server. wrk is spawned here, so a round costs no Node start-up; autocannon runs in a
 * load.ts process of its own, so that its CPU is not the orchestrator's.
 */
async function runLoad(tool: LoadTool, options: LoadOptions, ids: readonly string[], signal: AbortSignal): Promise<LoadResult> {
  if (tool === 'wrk') {
    const script = path.join(path.dirname(options.idsFile), 'wrk.lua')
    fs.writeFileSync(script, wrkScript(options, ids))
    const { code, stdout, stderr } = await spawnLoadGenerator('wrk', wrkArgs(options, script), options.durationS, signal)
    return parseWrk(code, stdout + stderr)
  }
  const args = ['--import', 'tsx', path.join(import.meta.dirname, 'load.ts'), JSON.stringify(options)]
  const { code, stdout, stderr } = await spawnLoadGenerator(process.execPath, args, options.durationS, signal)
  const line = stdout.trim().split('\n').at(-1) ?? ''
  if (code !== 0 || line === '') throw new Error(`load generator failed (exit ${code}): ${stderr.trim() || stdout.trim()}`)
  return JSON.parse(line) as LoadResult
}

/**
 * The order of `servers` servers in round `index`: the rows of a Williams design (a balanced Latin
 * square), in turn. Over a cycle of n rounds (2n when n is odd) every server runs once in every place and
 * right after every other server equally often, so that neither a place in the round nor what the server
 * before left behind (its log still being written, dirty pages, a busier core) favours one server.
 */
function roundOrder(servers: number, index: number): number[] {
  const n = servers
  const row = index % (n % 2 === 0 ? n : 2 * n)
  // The first row is 0, 1, n-1, 2, n-2, …; row r adds r to each (mod n); for odd n the second n rows
  // are the first n reversed.
  const first = Array.from({ length: n }, (_, place) => (place === 0 ? 0 : place % 2 === 1 ? (place + 1) / 2 : n - place / 2))
  const shifted = first.map((server) => (server + row) % n)
  return row < n ? shifted : shifted.reverse()
}

/** A round that saw anything but 2xx measured failures, not the service: stop and say what came back. */
async function assertClean(result: LoadResult, server: string, scenario: Scenario, origin: string, key: string): Promise<void> {
  if (result.non2xx === 0 && result.errors === 0 && result.requests > 0) return
  const response = await fetch(origin + scenario.path.replace('{id}', '1'), {
    method: scenario.method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: scenario.method === 'POST' ? petBody(0, 'probe') : undefined,
  }).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))))
  const probe =
    response instanceof Error ? `; a probe failed too: ${response.message}` : `; a probe now gets ${response.status}: ${(await response.text()).slice(0, 300)}`
  throw new Error(
    `${server}, ${scenario.label}: ${result.requests} answered, ${result.non2xx} non-2xx, ${result.errors} socket errors ` +
      `(${result.timeouts} timeouts), status codes ${JSON.stringify(result.statusCodes)}${probe}`,
  )
}

interface Server {
  /** As failure messages name it; also makes the names of the pets it creates its own. */
  name: string
  url: string
  process: NodeProcess
}

/**
 * The servers of a run: the service, the floor it is judged against, the baseline, and the companions
 * measured next to them (on PostgreSQL the postgres.js baseline).
 */
export interface Servers {
  baseline: Server
  service: Server
  floor: Server
  companions: Partial<Record<CompanionId, Server>>
}

/**
 * One scenario on every server: a warm-up on each (discarded), then `rounds` rounds in which baseline,
 * service, floor and each companion run once, in the order roundOrder gives, each a fresh load
 * generator; the ratios of a round compare runs seconds apart. Then more rounds, a whole cycle of the
 * order at a time, up to `maxRounds`, while the medians judged are not settled: while the 95 % interval
 * of any still reaches its target (roundsSettle), so that more rounds would not turn the verdict.
 */
export async function measureScenario(
  scenario: Scenario,
  servers: Servers,
  mode: { rounds: number; maxRounds: number; roundS: number; warmupS: number },
  run: { engine: EngineName; key: string; idsFile: string; tool: LoadTool; signal: AbortSignal },
): Promise<Pick<ScenarioReport, 'warmup' | 'rounds'>> {
  const ids = JSON.parse(fs.readFileSync(run.idsFile, 'utf8')) as string[]
  if (ids.length === 0) throw new Error('no pet ids')
  let runs = 0
  const measure = async (server: Server, durationS: number) => {
    // The server is idle while the load generator starts and after it ends: its CPU over the whole run is the load's.
    const cpuBefore = processCpuUs(server.process.pid)
    const options: LoadOptions = {
      baseUrl: server.url,
      key: run.key,
      scenario: scenario.id,
      connections: CONNECTIONS,
      durationS,
      idsFile: run.idsFile,
      // Distinct names per run, so no two creates send the same body.
      namePrefix: `${server.name}-${scenario.id}-${runs++}`,
    }
    const result = await runLoad(run.tool, options, ids, run.signal)
    if (server.process.exit !== undefined) throw new Error(`${server.name} stopped during the run (${describeExit(server.process.exit)})`)
    result.serverCpuUsPerRequest = Math.round(((processCpuUs(server.process.pid) - cpuBefore) / result.requests) * 10) / 10
    await assertClean(result, server.name, scenario, server.url, run.key)
    return result
  }
  const entries: [keyof PerServer<LoadResult>, Server][] = [
    ['baseline', servers.baseline],
    ['service', servers.service],
    ['floor', servers.floor],
    ...(Object.entries(servers.companions) as [CompanionId, Server][]),
  ]
  process.stdout.write(
    `bench: ${scenario.label}: warm-up ${mode.warmupS} s each, then ${mode.rounds} rounds of ${mode.roundS} s ` +
      `(up to ${mode.maxRounds} until settled); svc ÷ floor:`,
  )
  const warmup: Partial<PerServer<LoadResult>> = {}
  for (const [id, server] of entries) warmup[id] = await measure(server, mode.warmupS)
  const rounds: Round[] = []
  const cycle = entries.length % 2 === 0 ? entries.length : 2 * entries.length
  const targets = targetsOf(scenario, run.engine)
  const settled = () => roundsSettle(rounds, targets)
  const more = (index: number) => index < mode.rounds || (index < mode.maxRounds && (index % cycle !== 0 || !settled()))
  for (let index = 0; more(index); index++) {
    const cpuBefore = cpuInUse()
    const startedAt = performance.now()
    const results: Partial<PerServer<LoadResult>> = {}
    for (const place of roundOrder(entries.length, index)) {
      const entry = entries[place]
      if (entry !== undefined) results[entry[0]] = await measure(entry[1], mode.roundS)
    }
    const cpuAfter = cpuInUse()
    const othersUs = cpuAfter.machineUs - cpuBefore.machineUs - (cpuAfter.benchUs - cpuBefore.benchUs)
    const othersCpuShare = Math.max(0, round(othersUs / ((performance.now() - startedAt) * 1000 * os.cpus().length), 3))
    const measured: Round = { ...complete(results), ...roundRatios(complete(results)), othersCpuShare }
    process.stdout.write(` ${measured.serviceFloorRatio.toFixed(2)}`)
    rounds.push(measured)
  }
  process.stdout.write('\n')
  return { warmup: complete(warmup), rounds }
}

/** Results of a round (or the warm-up) once every server has run. */
function complete(results: Partial<PerServer<LoadResult>>): PerServer<LoadResult> {
  const { baseline, service, floor } = results
  if (baseline === undefined || service === undefined || floor === undefined) throw new Error('a round without the baseline, the service or the floor')
  return { ...results, baseline, service, floor }
}
