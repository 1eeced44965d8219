// The benchmark: `petstore serve` judged against the floor (Fastify with the mandated libraries on the
// reference baseline's store), and both against a bare node:http baseline serving the same bytes, each
// driven by its own load-generator process, rounds interleaved because the machine is shared and
// noisy. On SQLite the baseline keeps the pets in memory; on PostgreSQL (`--engine postgres`) two
// baselines read and write the service's own tables, one through node-postgres (the reference), one
// through postgres.js. Floor ÷ baseline is what the mandated libraries cost by themselves.
// With `--pooler` (PostgreSQL) the service also runs with its queries unnamed, straight to the server and
// through a PgBouncer in transaction mode (scripts/pg-cluster.ts), each reported against the service. With
// `--compare <bin>`, another build of the service runs in the same rounds, reported against the service.
// `npm run bench [-- --quick] [-- --engine postgres [-- --pooler]] [-- --compare <bin>]`; see bench/README.md for how to read the output.
// The parts: setup.ts (build, service, seeding, baselines), scripts/embedded-postgres.ts (the embedded server),
// identity.ts (the byte-identity check), rounds.ts (the load), report.ts (tables and the results JSON).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { BIN, type NodeProcess, describeExit, guardRun, logTail, procStatusKb, stopProcess } from '../scripts/petstore-process.js'
import { assertIdenticalBodies } from './identity.js'
import type { LoadTool } from './load.js'
import { type EmbeddedServer, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'
import { type Pooler, startPgBouncer } from '../scripts/pg-cluster.js'
import {
  COMPANIONS,
  type CompanionId,
  type EngineName,
  type PerServer,
  type ScenarioReport,
  machine,
  megabytes,
  printScenario,
  revision,
  seconds,
  summarise,
  writeReport,
} from './report.js'
import { type Servers, killLoadGenerators, measureScenario } from './rounds.js'
import { CONNECTIONS, SCENARIOS } from './scenarios.js'
import { type BaselineKind, type Engine, SEED_PETS, type Setup, build, compileBaselines, refusalCounters, setUp, startBaseline, startService } from './setup.js'

const KILL_AFTER_MS = 5_000

interface Mode {
  name: 'full' | 'quick'
  /** Rounds every scenario runs. */
  rounds: number
  /** Rounds a scenario may run, in whole cycles of the order, until its judged medians are settled (rounds.ts). */
  maxRounds: number
  roundS: number
  warmupS: number
}

const MODES = {
  // Many short rounds rather than a few long ones: a shared machine's load comes and goes within seconds,
  // and each round compares servers measured a second or two apart, in an order that changes (roundOrder
  // in rounds.ts). 12 rounds are two cycles of the order with three servers, three with four. wrk takes
  // whole seconds. A round's service ÷ floor varies by about 0.1-0.15 from round to round even on a
  // quiet VM, so a scenario whose median is near a target runs on, up to maxRounds, until the median's
  // 95 % interval clears it (bench/README.md). Load: scenarios × servers × (warm-up + rounds × round),
  // SQLite quick 4 × 3 × (2 + 12..36) s = 2.8-7.6 minutes; set-up adds 0.5 to 2 minutes.
  sqlite: {
    full: { name: 'full', rounds: 24, maxRounds: 48, roundS: 1, warmupS: 2 },
    quick: { name: 'quick', rounds: 12, maxRounds: 36, roundS: 1, warmupS: 2 },
  },
  postgres: {
    full: { name: 'full', rounds: 16, maxRounds: 48, roundS: 1, warmupS: 2 },
    quick: { name: 'quick', rounds: 12, maxRounds: 36, roundS: 1, warmupS: 2 },
  },
} as const satisfies Record<EngineName, Record<string, Mode>>

const USAGE = `Usage: npm run bench [-- --quick] [-- --engine sqlite|postgres] [-- --pooler] [-- --compare <bin>] [-- --no-build] [-- --autocannon]

Judges \`petstore serve\` (${SEED_PETS.toLocaleString('en-US')} pets, logging at info) against the floor (Fastify, pino,
prom-client, @fastify/rate-limit on the reference baseline's store) and reports both against a bare node:http
baseline serving the same bytes, ${CONNECTIONS} connections, rounds interleaved; prints a table per scenario and writes
bench/results/<timestamp>-<engine>[-quick].json (ignored by git). Memory over minutes is the soak's: npm run soak.
  --engine    sqlite (default): the service on a SQLite file, the baseline in memory.
              postgres: the service on an embedded PostgreSQL server, against two baselines on its tables:
              node-postgres (the reference) and postgres.js.
  --pooler    With --engine postgres: the service also with DATABASE_PREPARED_STATEMENTS=false, straight to the
              server and through a PgBouncer in transaction mode, each reported ÷ the service (named statements)
  --compare   Another build of the service (its bin/petstore.js, e.g. in a git worktree of another commit, built)
              in the same rounds, on a copy of the SQLite database or on the same PostgreSQL tables, with the
              same settings; reported ÷ the service, never judged. Its answers must have the same bodies
  --quick     ${MODES.sqlite.quick.rounds} to ${MODES.sqlite.quick.maxRounds} rounds of ${MODES.sqlite.quick.roundS} s per server and scenario instead of ${MODES.sqlite.full.rounds} to ${MODES.sqlite.full.maxRounds} (SQLite)
              or ${MODES.postgres.full.rounds} to ${MODES.postgres.full.maxRounds} (PostgreSQL): more while a judged median is within the noise of its target
  --no-build  Use dist/ as it is instead of compiling src/ first
  --autocannon  Drive the servers with autocannon even when wrk is installed (wrk is used when it is on PATH)
Exit code: 0 every target met, 1 a target missed, 2 usage, 3 the benchmark itself failed.`

/** Sets a process's peak RSS (VmHWM) back to its RSS now (Linux 4.0 and later). */
function resetPeakRss(pid: number): void {
  fs.writeFileSync(`/proc/${pid}/clear_refs`, '5')
}

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

/**
 * What the service logged about its answers outside 2xx/3xx: wrk counts them without their codes, and
 * the temp folder with the log is gone once the run ends.
 */
function failedRequests(logPath: string): string {
  const byStatus = new Map<string, { count: number; example: string }>()
  try {
    for (const line of fs.readFileSync(logPath, 'utf8').split('\n')) {
      const status = /"status":([4-5]\d\d)\b/.exec(line)?.[1]
      if (status === undefined) continue
      const seen = byStatus.get(status) ?? { count: 0, example: line.slice(0, 400) }
      seen.count++
      byStatus.set(status, seen)
    }
  } catch {
    return 'the service log could not be read'
  }
  if (byStatus.size === 0) return 'the service logged no 4xx or 5xx answer'
  return [...byStatus].map(([status, { count, example }]) => `the service logged ${count} answers ${status}, e.g. ${example}`).join('\n')
}

/**
 * Per engine, the reference baseline (whose store the floor serves from) and the companions measured in
 * the same rounds: on PostgreSQL the postgres.js baseline.
 */
const REFERENCES = {
  sqlite: { baseline: { kind: 'memory', name: 'baseline' }, companions: {} },
  postgres: { baseline: { kind: 'pg', name: 'node-postgres baseline' }, companions: { postgresJs: 'postgres' } },
} as const satisfies Record<EngineName, { baseline: { kind: BaselineKind; name: string }; companions: Partial<Record<CompanionId, BaselineKind>> }>

/** Connections of the pooler to PostgreSQL: the service's own pool (DATABASE_POOL_SIZE's default), so only the pooling differs. */
const POOLER_POOL_SIZE = 10

/**
 * With `--pooler`: the service again, on the same tables, its queries unnamed as a transaction pooler
 * requires, straight to the server and through the pooler (issue 29). Each is measured against the service.
 */
function pooledServices(setup: Setup, poolerUrl: string): [CompanionId, Record<string, string>][] {
  if (setup.engine.name !== 'postgres') throw new Error('--pooler needs the PostgreSQL engine')
  const unnamed = { PATH: process.env.PATH ?? '', DATABASE_PREPARED_STATEMENTS: 'false' }
  return [
    ['unnamed', { ...unnamed, DATABASE_URL: setup.engine.url }],
    ['pooled', { ...unnamed, DATABASE_URL: poolerUrl }],
  ]
}

/**
 * With `--compare`: the other build's environment. On SQLite it gets a copy of the seeded database of its own:
 * sharing the file, each process's commits (getPet's usage counts, flushed every 10 s) would empty the other's
 * read cache (`PRAGMA data_version`). On PostgreSQL it shares the tables, as every instance of a fleet does.
 */
function otherBuildEnv(setup: Setup): Record<string, string> {
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: setup.databaseUrl }
  if (setup.engine.name === 'postgres') return env
  const copy = path.join(setup.dir, 'other-build.db')
  execFileSync(process.execPath, [BIN, 'backup', copy], { env, stdio: 'ignore' })
  return { ...env, DATABASE_URL: `sqlite://${copy}` }
}

/** Identity checks, then every scenario on every server; true when every target was met. */
async function benchmark(
  run: { mode: Mode; engine: EngineName; startedAt: Date; header: object; poolerUrl?: string; compare?: string },
  setup: Setup,
  started: Set<NodeProcess>,
  signal: AbortSignal,
): Promise<boolean> {
  const { mode, engine } = run
  const compiled = await compileBaselines(setup.dir)
  const references = REFERENCES[engine]
  const baseline = await startBaseline(setup, references.baseline.kind, compiled, started)
  const floor = await startBaseline(setup, 'floor', compiled, started)
  const companions: [CompanionId, Awaited<ReturnType<typeof startBaseline>>][] = []
  for (const [id, kind] of Object.entries(references.companions) as [CompanionId, BaselineKind][]) {
    companions.push([id, await startBaseline(setup, kind, compiled, started)])
  }
  const services: [CompanionId, Record<string, string>, string?][] = run.poolerUrl === undefined ? [] : pooledServices(setup, run.poolerUrl)
  if (run.compare !== undefined) services.push(['other', otherBuildEnv(setup), run.compare])
  for (const [id, env, bin] of services) {
    const { service } = await startService(setup.dir, `service-${id}`, env, started, bin)
    console.log(`bench: ${COMPANIONS[id].name} pid ${service.pid} on ${service.baseUrl}${bin === undefined ? '' : ` (${bin})`}`)
    companions.push([id, { process: service, url: service.baseUrl }])
  }
  await assertIdenticalBodies(
    setup.service.baseUrl,
    [
      { name: references.baseline.name, url: baseline.url },
      { name: 'floor', url: floor.url },
      ...companions.map(([id, server]) => ({ name: COMPANIONS[id].row, url: server.url })),
    ],
    setup.key,
    setup.ids,
    engine === 'postgres',
  )

  const servers: Servers = {
    baseline: { name: 'baseline', url: baseline.url, process: baseline.process },
    service: { name: 'service', url: setup.service.baseUrl, process: setup.service },
    floor: { name: 'floor', url: floor.url, process: floor.process },
    companions: Object.fromEntries(companions.map(([id, server]) => [id, { name: COMPANIONS[id].name, url: server.url, process: server.process }])),
  }
  // The peaks judged are the measured traffic's: the service's seeding (10,000 creates) and the others'
  // start-up are not part of it.
  for (const server of [servers.baseline, servers.service, servers.floor, ...Object.values(servers.companions)]) resetPeakRss(server.process.pid)
  const reports: ScenarioReport[] = []
  for (const scenario of SCENARIOS) {
    const { warmup, rounds } = await measureScenario(scenario, servers, mode, { engine, key: setup.key, idsFile: setup.idsFile, tool: setup.tool, signal })
    const memory = (field: 'VmHWM' | 'VmRSS') => {
      const mb: PerServer<number> = {
        service: megabytes(procStatusKb(setup.service.pid, field)),
        baseline: megabytes(procStatusKb(baseline.process.pid, field)),
        floor: megabytes(procStatusKb(floor.process.pid, field)),
      }
      for (const [id, server] of companions) mb[id] = megabytes(procStatusKb(server.process.pid, field))
      return mb
    }
    const report = summarise(scenario, engine, warmup, rounds, { peakRssMb: memory('VmHWM'), rssAfterMb: memory('VmRSS') })
    reports.push(report)
    printScenario(report)
  }
  const allPass = writeReport(
    { engine, mode: mode.name, rounds: mode.rounds, roundS: mode.roundS, seedPets: SEED_PETS, startedAt: run.startedAt, header: run.header },
    reports,
  )
  await Promise.all([baseline, floor, ...companions.map(([, server]) => server)].map((server) => stopProcess(server.process, { killAfterMs: KILL_AFTER_MS })))
  return allPass
}

async function main(): Promise<number> {
  let mode: Mode
  let engineName: EngineName
  let buildFirst: boolean
  let tool: LoadTool
  let withPooler: boolean
  let compare: string | undefined
  try {
    const { values } = parseArgs({
      options: {
        quick: { type: 'boolean' },
        engine: { type: 'string', default: 'sqlite' },
        pooler: { type: 'boolean' },
        compare: { type: 'string' },
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
    if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error(`--engine must be sqlite or postgres, got "${values.engine}"`)
    engineName = values.engine
    withPooler = values.pooler === true
    if (withPooler && engineName !== 'postgres') throw new Error('--pooler needs --engine postgres')
    compare = values.compare === undefined ? undefined : path.resolve(values.compare)
    if (compare !== undefined && !fs.statSync(compare, { throwIfNoEntry: false })?.isFile()) throw new Error(`--compare: no file ${compare}`)
    mode = values.quick === true ? MODES[engineName].quick : MODES[engineName].full
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
  let postgres: EmbeddedServer | undefined
  let pooler: Pooler | undefined
  const servers = 3 + Object.keys(REFERENCES[engineName].companions).length + (withPooler ? 2 : 0) + (compare === undefined ? 0 : 1)
  // The bound follows the most load the run may take (every scenario to maxRounds), with room for the
  // load generators' start-ups (about a fifth of a round here) and the set-up.
  const loadS = (rounds: number) => SCENARIOS.length * servers * (mode.warmupS + rounds * mode.roundS)
  const hardLimitS = Math.ceil(loadS(mode.maxRounds) * 1.5 + 180)
  const { stop, interrupted } = guardRun({
    name: 'bench',
    hardCleanup: () => {
      for (const child of started) child.child.kill('SIGKILL')
      killLoadGenerators()
      postgres?.kill()
      // The pooler is SIGKILLed by scripts/pg-cluster.ts at this process's exit.
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: hardLimitS * 1000,
    timeLimitExitCode: 3,
    timeLimitMessage: `still running after ${hardLimitS} s; killing everything and giving up.`,
  })

  console.log(
    `bench: ${mode.name} run on ${engineName}; ${Math.ceil(loadS(mode.rounds) / 60)}-${Math.ceil(loadS(mode.maxRounds) / 60)} min of load ` +
      `plus set-up; bounded at ${hardLimitS} s`,
  )
  let setup: Setup | undefined
  try {
    if (buildFirst) await build()
    console.log(`bench: load generator: ${tool}${tool === 'wrk' ? '' : ' (install wrk to spare the shared CPU)'}`)
    let engine: Engine = { name: 'sqlite' }
    let poolerUrl: string | undefined
    if (engineName === 'postgres') {
      postgres = await startEmbeddedPostgres()
      engine = { name: 'postgres', url: postgres.url }
      console.log('bench: embedded PostgreSQL server started')
      if (withPooler) {
        const server = new URL(postgres.url)
        pooler = await startPgBouncer(
          { port: Number(server.port), user: decodeURIComponent(server.username), password: decodeURIComponent(server.password) },
          { poolMode: 'transaction', poolSize: POOLER_POOL_SIZE },
        )
        poolerUrl = pooler.url(server.pathname.slice(1))
        console.log(`bench: PgBouncer in transaction mode on port ${pooler.port} in front of it`)
      }
    }
    setup = { ...(await setUp(dir, engine, started, stop.signal)), tool }
    const { service } = setup
    void service.exited.then((exit) => stop.abort(new Error(`petstore serve stopped unexpectedly (${describeExit(exit)})`)))
    const header = {
      startedAt: startedAt.toISOString(),
      mode: mode.name,
      revision: await revision(),
      machine: machine(),
      settings: {
        loadGenerator: tool,
        connections: CONNECTIONS,
        rounds: mode.rounds,
        maxRounds: mode.maxRounds,
        roundS: mode.roundS,
        warmupS: mode.warmupS,
        order: 'per round a row of a Williams design: every server in every place, and right after every other, equally often',
        database: engineName,
        baselines:
          engineName === 'postgres'
            ? ['node-postgres (reference)', 'postgres.js', 'floor (Fastify, pino, prom-client, @fastify/rate-limit; node-postgres)']
            : ['memory (reference)', 'floor (Fastify, pino, prom-client, @fastify/rate-limit; memory)'],
        pooler:
          pooler === undefined
            ? undefined
            : {
                services: ['unnamed: DATABASE_PREPARED_STATEMENTS=false, straight to PostgreSQL', 'pooled: the same through PgBouncer'],
                pgbouncer: (await pooler.admin('SHOW VERSION'))[0]?.version,
                poolMode: 'transaction',
                poolSize: POOLER_POOL_SIZE,
              },
        logLevel: 'info',
        compare,
      },
      seeding: setup.seeding,
    }
    const pass = await benchmark({ mode, engine: engineName, startedAt, header, poolerUrl, compare }, setup, started, stop.signal)
    console.log(`bench: total ${seconds(Date.now() - startedAt.getTime())}`)
    return pass ? 0 : 1
  } catch (error) {
    const reason: unknown = stop.signal.aborted ? stop.signal.reason : error
    if (interrupted()) return 130
    console.error(`bench: FAILED: ${reason instanceof Error ? reason.message : String(reason)}`)
    if (setup !== undefined) {
      console.error(`last lines of the service log:\n${logTail(setup.serviceLog)}\n${failedRequests(setup.serviceLog)}`)
      console.error(await refusalCounters(setup.metricsUrl))
    }
    return 3
  } finally {
    await Promise.all([...started].map((child) => stopProcess(child, { killAfterMs: KILL_AFTER_MS })))
    await pooler?.destroy().catch(() => {})
    await postgres?.destroy().catch(() => postgres?.kill())
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

process.exit(await main())
