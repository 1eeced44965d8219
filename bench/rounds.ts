// The benchmark's load: one load-generator process (load.ts) per measured run, warm-up and
// interleaved rounds per scenario, and a stop with what came back when a run saw anything but 2xx.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { type NodeProcess, ROOT, describeExit } from '../scripts/petstore-process.js'
import type { LoadOptions, LoadResult } from './load.js'
import { COMPANIONS, type CompanionId, type PerServer, type Round, type ScenarioReport, ratioKey, roundRatios } from './report.js'
import { CONNECTIONS, type Scenario, petBody } from './scenarios.js'

/** Load generators running now; they end by themselves, but not before the hard time bound would. */
const loadGenerators = new Set<ChildProcess>()

/** The last resort on exit: load generators are detached, so nothing else would end them. */
export function killLoadGenerators(): void {
  for (const child of loadGenerators) child.kill('SIGKILL')
}

/** Clock ticks per second, the unit of /proc/<pid>/stat's CPU times. */
let ticksPerSecond: number | undefined

/** The CPU time a process has used so far, user and system, all its threads (exited ones included), in µs. */
function processCpuUs(pid: number): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  // Fields after the command's closing parenthesis, which the command itself may contain: utime is the 14th.
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1)?.split(' ') ?? []
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / ticksPerSecond
}

/** One load-generator process against one server; its JSON line is the result. */
async function runLoad(options: LoadOptions, signal: AbortSignal): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'load.ts'), JSON.stringify(options)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  loadGenerators.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const stop = () => child.kill('SIGTERM')
  signal.addEventListener('abort', stop, { once: true })
  const killer = setTimeout(() => child.kill('SIGKILL'), (options.durationS + 30) * 1000)
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)))
  loadGenerators.delete(child)
  clearTimeout(killer)
  signal.removeEventListener('abort', stop)
  signal.throwIfAborted()
  const line = stdout.trim().split('\n').at(-1) ?? ''
  if (code !== 0 || line === '') throw new Error(`load generator failed (exit ${code}): ${stderr.trim() || stdout.trim()}`)
  return JSON.parse(line) as LoadResult
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
 * One scenario on every server: a warm-up on each (discarded), then `rounds` rounds of baseline,
 * service, floor and each companion, each a fresh load generator; the ratios of a round compare runs
 * seconds apart, the service's with the floor's next to it.
 */
export async function measureScenario(
  scenario: Scenario,
  servers: Servers,
  mode: { rounds: number; roundS: number; warmupS: number },
  run: { key: string; idsFile: string; tool: LoadOptions['tool']; signal: AbortSignal },
): Promise<Pick<ScenarioReport, 'warmup' | 'rounds'>> {
  let runs = 0
  const measure = async (server: Server, durationS: number) => {
    // The server is idle while the load generator starts and after it ends: its CPU over the whole run is the load's.
    const cpuBefore = processCpuUs(server.process.pid)
    const result = await runLoad(
      {
        baseUrl: server.url,
        key: run.key,
        scenario: scenario.id,
        connections: CONNECTIONS,
        durationS,
        idsFile: run.idsFile,
        // Distinct names per run, so no two creates send the same body.
        namePrefix: `${server.name}-${scenario.id}-${runs++}`,
        tool: run.tool,
      },
      run.signal,
    )
    if (server.process.exit !== undefined) throw new Error(`${server.name} stopped during the run (${describeExit(server.process.exit)})`)
    result.serverCpuUsPerRequest = Math.round(((processCpuUs(server.process.pid) - cpuBefore) / result.requests) * 10) / 10
    await assertClean(result, server.name, scenario, server.url, run.key)
    return result
  }
  const { baseline, service, floor } = servers
  const companions = Object.entries(servers.companions) as [CompanionId, Server][]
  process.stdout.write(`bench: ${scenario.label}: warm-up ${mode.warmupS} s each`)
  const warmup: ScenarioReport['warmup'] = {
    baseline: await measure(baseline, mode.warmupS),
    service: await measure(service, mode.warmupS),
    floor: await measure(floor, mode.warmupS),
  }
  for (const [id, server] of companions) warmup[id] = await measure(server, mode.warmupS)
  const rounds: Round[] = []
  for (let index = 0; index < mode.rounds; index++) {
    const results: PerServer<LoadResult> = {
      baseline: await measure(baseline, mode.roundS),
      service: await measure(service, mode.roundS),
      floor: await measure(floor, mode.roundS),
    }
    for (const [id, server] of companions) results[id] = await measure(server, mode.roundS)
    const measured: Round = { ...results, ...roundRatios(results) }
    const others = [`svc ÷ base ${measured.serviceBaselineRatio.toFixed(2)}`, `CPU/req svc ÷ base ${measured.serviceBaselineCpuRatio.toFixed(2)}`]
    for (const [id] of companions) others.push(`${COMPANIONS[id].ratioColumn} ${measured[ratioKey(id)]?.toFixed(2) ?? '?'}`)
    process.stdout.write(`, round ${index + 1} svc ÷ floor ${measured.serviceFloorRatio.toFixed(2)} (${others.join(', ')})`)
    rounds.push(measured)
  }
  process.stdout.write('\n')
  return { warmup, rounds }
}
