// The benchmark: `petstore serve` against a bare node:http baseline serving the same bytes, each
// driven by its own load-generator process, rounds interleaved because the machine is shared and
// noisy. `npm run bench [-- --quick]`; see bench/README.md for how to read the output.
// The parts: setup.ts (build, service, seeding, baseline), identity.ts (the byte-identity check),
// rounds.ts (the load), report.ts (tables, results JSON and chart).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { type NodeProcess, describeExit, guardRun, logTail, procStatusKb, stopProcess } from '../scripts/petstore-process.js'
import { assertIdenticalBodies } from './identity.js'
import type { LoadOptions } from './load.js'
import { type ScenarioReport, machine, megabytes, printScenario, revision, seconds, summarise, writeReport } from './report.js'
import { type Server, killLoadGenerators, measureScenario } from './rounds.js'
import { CONNECTIONS, SCENARIOS } from './scenarios.js'
import { SEED_PETS, type Setup, build, setUp, startBaseline } from './setup.js'

const KILL_AFTER_MS = 5_000

interface Mode {
  name: 'full' | 'quick'
  rounds: number
  roundS: number
  warmupS: number
  /** Everything is killed and the run fails when it lasts longer than this. */
  hardLimitS: number
}

const MODES = {
  // 4 scenarios × (2 × 2 s warm-up + 4 rounds × 2 × 7 s) = 4 minutes of load. The build, seeding and
  // 40 load-generator start-ups add 1 to 3 minutes, depending on how busy the machine is; the issue
  // allows 8 in all.
  full: { name: 'full', rounds: 4, roundS: 7, warmupS: 2, hardLimitS: 470 },
  quick: { name: 'quick', rounds: 2, roundS: 3, warmupS: 1, hardLimitS: 240 },
} as const satisfies Record<string, Mode>

const USAGE = `Usage: npm run bench [-- --quick] [-- --no-build] [-- --autocannon]

Compares \`petstore serve\` (SQLite, ${SEED_PETS.toLocaleString('en-US')} pets, logging at info) with a bare node:http
baseline serving the same bytes, ${CONNECTIONS} connections, rounds interleaved; prints a table per scenario and
writes bench/results/<timestamp>.json and .svg. Memory over minutes is the soak's: npm run soak.
  --quick     ${MODES.quick.rounds} rounds of ${MODES.quick.roundS} s per server and scenario (2-3 minutes in all) instead of ${MODES.full.rounds} of ${MODES.full.roundS} s (5-7)
  --no-build  Use dist/ as it is instead of compiling src/ first
  --autocannon  Drive the servers with autocannon even when wrk is installed (wrk is used when it is on PATH)
Exit code: 0 every target met, 1 a target missed, 2 usage, 3 the benchmark itself failed.`

/** True when an executable of this name is on PATH. */
function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

/** Identity check, then every scenario on both servers; true when every target was met. */
async function benchmark(mode: Mode, setup: Setup, started: Set<NodeProcess>, signal: AbortSignal, startedAt: Date, header: object): Promise<boolean> {
  const baseline = await startBaseline(setup, started)
  await assertIdenticalBodies(setup.service.baseUrl, baseline.url, setup.key, setup.ids)

  const servers: readonly [Server, Server] = [
    { name: 'baseline', url: baseline.url, process: baseline.process },
    { name: 'service', url: setup.service.baseUrl, process: setup.service },
  ]
  const reports: ScenarioReport[] = []
  for (const scenario of SCENARIOS) {
    const { warmup, rounds } = await measureScenario(scenario, servers, mode, { key: setup.key, idsFile: setup.idsFile, tool: setup.tool, signal })
    const memory = (field: 'VmHWM' | 'VmRSS') => ({
      service: megabytes(procStatusKb(setup.service.pid, field)),
      baseline: megabytes(procStatusKb(baseline.process.pid, field)),
    })
    const report = summarise(scenario, warmup, rounds, { peakRssMb: memory('VmHWM'), rssAfterMb: memory('VmRSS') })
    reports.push(report)
    printScenario(report)
  }
  const allPass = writeReport({ mode: mode.name, rounds: mode.rounds, roundS: mode.roundS, seedPets: SEED_PETS, startedAt, header }, reports)
  await stopProcess(baseline.process, { killAfterMs: KILL_AFTER_MS })
  return allPass
}

async function main(): Promise<number> {
  let mode: Mode
  let buildFirst: boolean
  let tool: LoadOptions['tool']
  try {
    const { values } = parseArgs({
      options: {
        quick: { type: 'boolean' },
        'no-build': { type: 'boolean' },
        autocannon: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    })
    if (values.help === true) {
      console.log(USAGE)
      return 0
    }
    mode = values.quick === true ? MODES.quick : MODES.full
    buildFirst = values['no-build'] !== true
    tool = values.autocannon !== true && onPath('wrk') ? 'wrk' : 'autocannon'
  } catch (error) {
    console.error(`bench: ${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (!fs.existsSync('/proc/self/status')) {
    console.error('bench: reads memory from /proc, so it runs on Linux only.')
    return 3
  }

  const startedAt = new Date()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-bench-'))
  /** The servers running now, stopped in order at the end and SIGKILLed by the last resort. */
  const started = new Set<NodeProcess>()
  const { stop, interrupted } = guardRun({
    name: 'bench',
    hardCleanup: () => {
      for (const child of started) child.child.kill('SIGKILL')
      killLoadGenerators()
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: mode.hardLimitS * 1000,
    timeLimitExitCode: 3,
    timeLimitMessage: `still running after ${mode.hardLimitS} s; killing everything and giving up.`,
  })

  const loadS = SCENARIOS.length * (2 * mode.warmupS + 2 * mode.rounds * mode.roundS)
  console.log(`bench: ${mode.name} run; about ${Math.ceil(loadS / 60)} min of load plus set-up; bounded at ${mode.hardLimitS} s`)
  let setup: Setup | undefined
  try {
    if (buildFirst) await build()
    console.log(`bench: load generator: ${tool}${tool === 'wrk' ? '' : ' (install wrk to spare the shared CPU)'}`)
    setup = { ...(await setUp(dir, started, stop.signal)), tool }
    const { service } = setup
    void service.exited.then((exit) => stop.abort(new Error(`petstore serve stopped unexpectedly (${describeExit(exit)})`)))
    const header = {
      startedAt: startedAt.toISOString(),
      mode: mode.name,
      revision: await revision(),
      machine: machine(),
      settings: { loadGenerator: tool, connections: CONNECTIONS, rounds: mode.rounds, roundS: mode.roundS, warmupS: mode.warmupS, database: 'sqlite', logLevel: 'info' },
      seeding: setup.seeding,
    }
    const pass = await benchmark(mode, setup, started, stop.signal, startedAt, header)
    console.log(`bench: total ${seconds(Date.now() - startedAt.getTime())}`)
    return pass ? 0 : 1
  } catch (error) {
    const reason: unknown = stop.signal.aborted ? stop.signal.reason : error
    if (interrupted()) return 130
    console.error(`bench: FAILED: ${reason instanceof Error ? reason.message : String(reason)}`)
    if (setup !== undefined) console.error(`last lines of the service log:\n${logTail(setup.serviceLog)}`)
    return 3
  } finally {
    await Promise.all([...started].map((child) => stopProcess(child, { killAfterMs: KILL_AFTER_MS })))
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

process.exit(await main())
