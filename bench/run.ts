// The benchmark: `petstore serve` against a bare node:http baseline serving the same bytes, each
// driven by its own load-generator process, rounds interleaved because the machine is shared and
// noisy. `npm run bench [-- --quick | --soak]`; see bench/README.md for how to read the output.
import Database from 'better-sqlite3'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs, promisify } from 'node:util'
import { BIN, ROOT, createKey, logTail, procStatusKb, round } from '../scripts/service-process.js'
import { freePort } from '../test/processes.js'
import { benchmarkSvg, soakSvg } from './chart.js'
import type { LoadOptions, LoadResult } from './load.js'
import { P99_LIMIT_MS, RSS_LIMIT_MB, SCENARIOS, SOAK_RSS_GROWTH_LIMIT_PCT, type Scenario, petBody } from './scenarios.js'

const RESULTS_DIR = path.join(import.meta.dirname, 'results')

const CONNECTIONS = 50
const SEED_PETS = 10_000
const SEED_CONCURRENCY = 16
/** getOne bodies compared between the servers before measuring, spread over the seeded ids. */
const IDENTITY_SAMPLE = 50
const RSS_SAMPLE_MS = 5_000
const SOAK_SETTLED_AFTER_S = 20
const KILL_AFTER_MS = 5_000

interface Mode {
  name: 'full' | 'quick' | 'soak' | 'quick soak'
  rounds: number
  roundS: number
  warmupS: number
  soakS: number
  /** Everything is killed and the run fails when it lasts longer than this. */
  hardLimitS: number
}

const MODES = {
  // 4 scenarios × (2 × 2 s warm-up + 4 rounds × 2 × 7 s) = 4 minutes of load. The build, seeding and
  // 40 load-generator start-ups add 1 to 3 minutes, depending on how busy the machine is; the issue
  // allows 8 in all.
  full: { name: 'full', rounds: 4, roundS: 7, warmupS: 2, soakS: 0, hardLimitS: 470 },
  quick: { name: 'quick', rounds: 2, roundS: 3, warmupS: 1, soakS: 0, hardLimitS: 240 },
  soak: { name: 'soak', rounds: 0, roundS: 0, warmupS: 0, soakS: 120, hardLimitS: 300 },
  quickSoak: { name: 'quick soak', rounds: 0, roundS: 0, warmupS: 0, soakS: 30, hardLimitS: 180 },
} as const satisfies Record<string, Mode>

const USAGE = `Usage: npm run bench [-- --quick] [-- --soak] [-- --no-build] [-- --autocannon]

Compares \`petstore serve\` (SQLite, ${SEED_PETS.toLocaleString('en-US')} pets, logging at info) with a bare node:http
baseline serving the same bytes, ${CONNECTIONS} connections, rounds interleaved; prints a table per scenario and
writes bench/results/<timestamp>.json and .svg.
  --quick     ${MODES.quick.rounds} rounds of ${MODES.quick.roundS} s per server and scenario (2-3 minutes in all) instead of ${MODES.full.rounds} of ${MODES.full.roundS} s (5-7)
  --soak      The service alone under mixed traffic for ${MODES.soak.soakS / 60} minutes, RSS sampled every ${RSS_SAMPLE_MS / 1000} s
              (with --quick: ${MODES.quickSoak.soakS} s)
  --no-build  Use dist/ as it is instead of compiling src/ first
  --autocannon  Drive the servers with autocannon even when wrk is installed (wrk is used when it is on PATH)
Exit code: 0 every target met, 1 a target missed, 2 usage, 3 the benchmark itself failed.`

class BenchFailure extends Error {}

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

/** A child process started by the bench, with its exit recorded. */
interface Child {
  name: string
  process: ChildProcess
  pid: number
  exited: Promise<void>
  exit?: string
}

const children = new Set<Child>()
/** Load generators running now; they end by themselves, but not before the hard time bound would. */
const loadGenerators = new Set<ChildProcess>()

function startChild(name: string, args: string[], env: Record<string, string>, logPath: string): Child {
  const log = fs.openSync(logPath, 'a')
  // Own process group: Ctrl-C reaches only this script, which then stops each child in order.
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', log, log], detached: true })
  fs.closeSync(log)
  if (child.pid === undefined) throw new BenchFailure(`could not start ${name}`)
  const entry: Child = {
    name,
    process: child,
    pid: child.pid,
    exited: new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        entry.exit = signal === null ? `exit code ${code}` : `killed by ${signal}`
        children.delete(entry)
        resolve()
      })
    }),
  }
  children.add(entry)
  return entry
}

async function stopChild(child: Child): Promise<void> {
  if (child.exit !== undefined) return
  child.process.kill('SIGTERM')
  const killer = setTimeout(() => child.process.kill('SIGKILL'), KILL_AFTER_MS)
  await child.exited
  clearTimeout(killer)
}

/** Polls until `url` answers `status`; fails early if the child dies. */
async function waitReady(child: Child, url: string, headers: Record<string, string>, logPath: string): Promise<void> {
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline && child.exit === undefined) {
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(1_000) })
      await response.arrayBuffer()
      if (response.status === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(100)
  }
  throw new BenchFailure(`${child.name} did not become ready (${child.exit ?? 'still running'}); its log ends:\n${logTail(logPath)}`)
}

function newestMtimeMs(dir: string): number {
  let newest = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}

/** Compiles src/ unless dist/ is newer than every source file: the bench measures the code as it is. */
async function build(): Promise<void> {
  const distCli = path.join(ROOT, 'dist', 'cli.js')
  if (fs.existsSync(distCli) && fs.statSync(distCli).mtimeMs >= newestMtimeMs(path.join(ROOT, 'src'))) {
    console.log('bench: dist/ is up to date with src/')
    return
  }
  const started = Date.now()
  try {
    await promisify(execFile)(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
      cwd: ROOT,
      timeout: 120_000,
    })
  } catch (error) {
    const output = (error as { stdout?: string }).stdout ?? (error as Error).message
    throw new BenchFailure(`npx tsc -p tsconfig.json failed (run with --no-build to measure dist/ as it is):\n${output.slice(0, 2_000)}`)
  }
  console.log(`bench: built dist/ in ${seconds(Date.now() - started)}`)
}

/** Creates the pets through the service's own API, as clients would, `SEED_CONCURRENCY` at a time. */
async function seed(baseUrl: string, key: string, signal: AbortSignal): Promise<void> {
  let next = 0
  const writer = async () => {
    while (next < SEED_PETS) {
      const body = petBody(next++, 'seed')
      const response = await fetch(`${baseUrl}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(10_000)]),
      })
      const text = await response.text()
      if (response.status !== 201) throw new BenchFailure(`seeding: POST /v1/pets answered ${response.status}: ${text.slice(0, 300)}`)
    }
  }
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, writer))
}

interface Pet {
  id: number
  name: string
  categoryId: number
  status?: string
}

/**
 * Every pet, in id order: through the API when listPets pages with `Link: <…>; rel="next"`,
 * else straight from the SQLite file (read-only), for a service that does not page yet.
 */
async function readBack(baseUrl: string, key: string, dbPath: string): Promise<{ pets: Pet[]; source: string }> {
  const pets: Pet[] = []
  let url: string | undefined = `${baseUrl}/v1/pets?limit=100`
  while (url !== undefined) {
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
    const page = (await response.json()) as Pet[]
    if (response.status !== 200) throw new BenchFailure(`reading back: GET ${url} answered ${response.status}`)
    pets.push(...page)
    const next = /<([^>]+)>\s*;\s*rel="?next"?/.exec(response.headers.get('link') ?? '')?.[1]
    url = next === undefined || page.length === 0 ? undefined : new URL(next, baseUrl).href
  }
  if (pets.length >= SEED_PETS) return { pets, source: 'the API (Link rel="next" pages)' }

  const db = new Database(dbPath, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare('SELECT id, name, category_id AS categoryId, status FROM pets ORDER BY id').all() as (Pet & { status: string | null })[]
    return {
      pets: rows.map(({ status, ...pet }) => (status === null ? pet : { ...pet, status })),
      source: 'the SQLite file (listPets does not page yet)',
    }
  } finally {
    db.close()
  }
}

/** The GET answers of both servers must be the same bytes, or the comparison measures two different things. */
async function assertIdenticalBodies(service: string, baseline: string, key: string, ids: string[]): Promise<void> {
  const headers = { authorization: `Bearer ${key}` }
  const step = Math.max(1, Math.floor(ids.length / IDENTITY_SAMPLE))
  const sampleIds = ids.filter((_, index) => index % step === 0).slice(0, IDENTITY_SAMPLE)
  const paths = [
    ...SCENARIOS.filter((scenario) => scenario.method === 'GET' && !scenario.path.includes('{id}')).map((scenario) => scenario.path),
    ...sampleIds.map((id) => `/v1/pets/${id}`),
  ]
  const differences: string[] = []
  for (const requestPath of paths) {
    const [fromService, fromBaseline] = await Promise.all(
      [service, baseline].map(async (origin) => {
        const response = await fetch(origin + requestPath, { headers })
        return { status: response.status, body: Buffer.from(await response.arrayBuffer()) }
      }),
    )
    if (fromService === undefined || fromBaseline === undefined) continue
    if (fromService.status !== 200 || fromBaseline.status !== 200 || !fromService.body.equals(fromBaseline.body)) {
      differences.push(describeDifference(`GET ${requestPath}`, fromService, fromBaseline))
    }
  }
  // One create on each: the ids match too, since both continue from the same last id.
  const body = petBody(0, 'identity')
  const [created, createdBaseline] = await Promise.all(
    [service, baseline].map(async (origin) => {
      const response = await fetch(`${origin}/v1/pets`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body })
      return { status: response.status, body: Buffer.from(await response.arrayBuffer()), location: response.headers.get('location') ?? '' }
    }),
  )
  if (created !== undefined && createdBaseline !== undefined) {
    const samePath = new URL(created.location, service).pathname === new URL(createdBaseline.location, baseline).pathname
    if (created.status !== 201 || createdBaseline.status !== 201 || !created.body.equals(createdBaseline.body) || !samePath) {
      differences.push(
        describeDifference('POST /v1/pets', created, createdBaseline) + `\n  Location: service ${created.location}, baseline ${createdBaseline.location}`,
      )
    }
  }
  if (differences.length > 0) {
    throw new BenchFailure(`the baseline does not answer with the service's bytes, so the ratio would mean nothing:\n${differences.slice(0, 5).join('\n')}`)
  }
  console.log(`bench: bodies byte-identical on both servers for ${paths.length} GETs and 1 POST`)
}

function describeDifference(what: string, service: { status: number; body: Buffer }, baseline: { status: number; body: Buffer }): string {
  let at = 0
  while (at < service.body.length && service.body[at] === baseline.body[at]) at++
  const excerpt = (body: Buffer) => JSON.stringify(body.subarray(Math.max(0, at - 40), at + 60).toString('utf8'))
  return `${what}: service ${service.status} (${service.body.length} bytes), baseline ${baseline.status} (${baseline.body.length} bytes); first difference at byte ${at}:\n  service  ${excerpt(service.body)}\n  baseline ${excerpt(baseline.body)}`
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
  if (code !== 0 || line === '') throw new BenchFailure(`load generator failed (exit ${code}): ${stderr.trim() || stdout.trim()}`)
  return JSON.parse(line) as LoadResult
}

/** A round that saw anything but 2xx measured failures, not the service: stop and say what came back. */
async function assertClean(result: LoadResult, server: string, scenario: Scenario | undefined, origin: string, key: string): Promise<void> {
  if (result.non2xx === 0 && result.errors === 0 && result.requests > 0) return
  let probe = ''
  if (scenario !== undefined) {
    const requestPath = scenario.path.replace('{id}', '1')
    const response = await fetch(origin + requestPath, {
      method: scenario.method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: scenario.method === 'POST' ? petBody(0, 'probe') : undefined,
    }).catch((error: Error) => error)
    probe = response instanceof Error ? `; a probe failed too: ${response.message}` : `; a probe now gets ${response.status}: ${(await response.text()).slice(0, 300)}`
  }
  throw new BenchFailure(
    `${server}, ${scenario?.label ?? 'mixed traffic'}: ${result.requests} answered, ${result.non2xx} non-2xx, ${result.errors} socket errors ` +
      `(${result.timeouts} timeouts), status codes ${JSON.stringify(result.statusCodes)}${probe}`,
  )
}

/** /proc reports KiB; the limit is read as 120 × 10^6 bytes, the stricter reading. */
const megabytes = (kb: number) => round((kb * 1024) / 1e6, 1)

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  if (sorted.length === 0) return Number.NaN
  return sorted.length % 2 === 1 ? (sorted[middle] ?? Number.NaN) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
const count = (n: number) => Math.round(n).toLocaleString('en-US')
const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS')

interface Round {
  baseline: LoadResult
  service: LoadResult
  ratio: number
}

interface ScenarioReport {
  id: string
  label: string
  targetRatio: number
  warmup: { baseline: LoadResult; service: LoadResult }
  rounds: Round[]
  median: {
    ratio: number
    baseline: { requestsPerSecond: number; p50Ms: number; p99Ms: number }
    service: { requestsPerSecond: number; p50Ms: number; p99Ms: number }
  }
  /** VmHWM after the scenario: the peak since the process started. */
  peakRssMb: { service: number; baseline: number }
  /** VmRSS after the scenario. */
  rssAfterMb: { service: number; baseline: number }
  pass: { ratio: boolean; p99: boolean; rss: boolean }
}

function summarise(
  scenario: Scenario,
  warmup: ScenarioReport['warmup'],
  rounds: Round[],
  memory: Pick<ScenarioReport, 'peakRssMb' | 'rssAfterMb'>,
): ScenarioReport {
  const { peakRssMb } = memory
  const side = (which: 'baseline' | 'service') => ({
    requestsPerSecond: round(median(rounds.map((r) => r[which].requestsPerSecond)), 1),
    p50Ms: median(rounds.map((r) => r[which].latencyMs.p50)),
    p99Ms: median(rounds.map((r) => r[which].latencyMs.p99)),
  })
  const ratio = round(median(rounds.map((r) => r.ratio)), 3)
  const service = side('service')
  return {
    id: scenario.id,
    label: scenario.label,
    targetRatio: scenario.targetRatio,
    warmup,
    rounds,
    median: { ratio, baseline: side('baseline'), service },
    ...memory,
    pass: { ratio: ratio >= scenario.targetRatio, p99: service.p99Ms <= P99_LIMIT_MS, rss: peakRssMb.service <= RSS_LIMIT_MB },
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  '))
    .join('\n')
}

function printScenario(report: ScenarioReport): void {
  const { median: m } = report
  console.log(
    [
      '',
      `${report.label}   (${report.rounds.length} rounds, ${CONNECTIONS} connections)`,
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'],
        ['baseline', count(m.baseline.requestsPerSecond), String(m.baseline.p50Ms), String(m.baseline.p99Ms), report.peakRssMb.baseline.toFixed(1)],
        ['service', count(m.service.requestsPerSecond), String(m.service.p50Ms), String(m.service.p99Ms), report.peakRssMb.service.toFixed(1)],
      ]).replace(/^/gm, '  '),
      `  ratio service/baseline ${m.ratio.toFixed(2)} (rounds ${report.rounds.map((r) => r.ratio.toFixed(2)).join(' ')})   target ≥ ${report.targetRatio.toFixed(2)}   ${verdict(report.pass.ratio)}`,
      `  service p99 ${m.service.p99Ms} ms   target ≤ ${P99_LIMIT_MS} ms   ${verdict(report.pass.p99)}`,
      `  service peak RSS ${report.peakRssMb.service.toFixed(1)} MB   target ≤ ${RSS_LIMIT_MB} MB   ${verdict(report.pass.rss)}`,
    ].join('\n'),
  )
}

function printSummary(reports: ScenarioReport[]): void {
  console.log(
    '\nSummary (medians over rounds; ratio = service req/s ÷ baseline req/s of the same round)\n' +
      table([
        ['scenario', 'baseline req/s', 'service req/s', 'ratio', 'target', '', 'p99 ms', '≤ 5', 'peak RSS MB', '≤ 120'],
        ...reports.map((r) => [
          r.label,
          count(r.median.baseline.requestsPerSecond),
          count(r.median.service.requestsPerSecond),
          r.median.ratio.toFixed(2),
          `≥ ${r.targetRatio.toFixed(2)}`,
          verdict(r.pass.ratio),
          String(r.median.service.p99Ms),
          verdict(r.pass.p99),
          r.peakRssMb.service.toFixed(1),
          verdict(r.pass.rss),
        ]),
      ]),
  )
}

function machine() {
  const cpus = os.cpus()
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    availableParallelism: os.availableParallelism(),
    totalMemoryMb: Math.round(os.totalmem() / 1e6),
    loadAverageAtStart: os.loadavg().map((value) => round(value, 2)),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  }
}

/** The commit measured, and whether src/ differed from it: results are compared by commit. */
async function revision(): Promise<{ commit: string; srcChanged: boolean } | undefined> {
  try {
    const git = (args: string[]) => promisify(execFile)('git', args, { cwd: ROOT, timeout: 10_000 }).then(({ stdout }) => stdout.trim())
    return { commit: await git(['rev-parse', 'HEAD']), srcChanged: (await git(['status', '--porcelain', '--', 'src'])) !== '' }
  } catch {
    return undefined
  }
}

function resultFiles(startedAt: Date, suffix: string): { json: string; svg: string } {
  fs.mkdirSync(RESULTS_DIR, { recursive: true })
  const stem = path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}${suffix}`)
  return { json: `${stem}.json`, svg: `${stem}.svg` }
}

interface Setup {
  dir: string
  key: string
  /** What drives the servers in the measured rounds. */
  tool: LoadOptions['tool']
  service: Child
  serviceUrl: string
  serviceLog: string
  ids: string[]
  idsFile: string
  pets: Pet[]
  /** VmHWM of the service once seeded: a peak reached here is not the measured traffic's. */
  seeding: { pets: number; seconds: number; readBackFrom: string; servicePeakRssMb: number }
}

/** Key, service, 10,000 pets through the API, and the same pets on disk for the baseline. */
async function setUp(dir: string, signal: AbortSignal): Promise<Omit<Setup, 'tool'>> {
  const dbPath = path.join(dir, 'petstore.db')
  // Only what the run needs: nothing from this shell (a DATABASE_URL, a PETSTORE_ENV) leaks in.
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite://${dbPath}` }
  const key = await createKey(env, 'bench')
  const port = await freePort()
  let metricsPort = await freePort()
  while (metricsPort === port) metricsPort = await freePort()
  const serviceLog = path.join(dir, 'service.log')
  const service = startChild(
    'petstore serve',
    [BIN, 'serve'],
    {
      ...env,
      HOST: '127.0.0.1',
      PORT: String(port),
      // Every request line is really written, to a file as in production; not dropped by the level.
      LOG_LEVEL: 'info',
      // The limiter still runs on every request, so its cost is measured, but never rejects the one key.
      RATE_LIMIT_PER_KEY: '1000000000',
      // Metrics stay on, as in production, on a port of their own: the default 9464 may be taken.
      METRICS_PORT: String(metricsPort),
      SHUTDOWN_DRAIN_MS: '0',
    },
    serviceLog,
  )
  const serviceUrl = `http://127.0.0.1:${port}`
  await waitReady(service, `${serviceUrl}/healthz`, {}, serviceLog)
  console.log(`bench: service pid ${service.pid} on ${serviceUrl}; database and logs in ${dir}`)

  const seedStart = Date.now()
  await seed(serviceUrl, key, signal)
  const seedMs = Date.now() - seedStart
  const { pets, source } = await readBack(serviceUrl, key, dbPath)
  if (pets.length !== SEED_PETS) throw new BenchFailure(`read back ${pets.length} pets, expected ${SEED_PETS}`)
  if (pets.some((pet) => !Number.isSafeInteger(pet.id) || !Number.isSafeInteger(pet.categoryId))) {
    throw new BenchFailure('an id beyond 2^53: the baseline keeps ids as JavaScript numbers')
  }
  const ids = pets.map((pet) => String(pet.id))
  const idsFile = path.join(dir, 'ids.json')
  fs.writeFileSync(idsFile, JSON.stringify(ids))
  const servicePeakRssMb = megabytes(procStatusKb(service.pid, 'VmHWM'))
  console.log(
    `bench: seeded ${count(SEED_PETS)} pets through POST /v1/pets in ${seconds(seedMs)} (${count(SEED_PETS / (seedMs / 1000))}/s), ` +
      `read back from ${source}; service peak RSS so far ${servicePeakRssMb.toFixed(1)} MB`,
  )
  return { dir, key, service, serviceUrl, serviceLog, ids, idsFile, pets, seeding: {
      pets: SEED_PETS,
      seconds: round(seedMs / 1000, 1),
      readBackFrom: source,
      servicePeakRssMb,
    },
  }
}

async function benchmark(mode: Mode, setup: Setup, signal: AbortSignal, startedAt: Date, header: object): Promise<boolean> {
  const petsFile = path.join(setup.dir, 'pets.json')
  fs.writeFileSync(petsFile, JSON.stringify(setup.pets))
  const baselinePort = await freePort()
  const baselineLog = path.join(setup.dir, 'baseline.log')
  const baseline = startChild(
    'baseline',
    ['--import', 'tsx', path.join(import.meta.dirname, 'baseline.ts')],
    { PATH: process.env.PATH ?? '', PORT: String(baselinePort), BENCH_KEY: setup.key, BENCH_PETS_FILE: petsFile },
    baselineLog,
  )
  const baselineUrl = `http://127.0.0.1:${baselinePort}`
  await waitReady(baseline, `${baselineUrl}/v1/pets?limit=1`, { authorization: `Bearer ${setup.key}` }, baselineLog)
  await assertIdenticalBodies(setup.serviceUrl, baselineUrl, setup.key, setup.ids)

  const servers = [
    { name: 'baseline', url: baselineUrl, child: baseline },
    { name: 'service', url: setup.serviceUrl, child: setup.service },
  ] as const
  const reports: ScenarioReport[] = []
  let runs = 0
  for (const scenario of SCENARIOS) {
    const measure = async (server: (typeof servers)[number], durationS: number) => {
      const result = await runLoad(
        {
          baseUrl: server.url,
          key: setup.key,
          scenario: scenario.id,
          connections: CONNECTIONS,
          durationS,
          idsFile: setup.idsFile,
          // Distinct names per run, so no two creates send the same body.
          namePrefix: `${server.name}-${runs++}`,
          tool: setup.tool,
        },
        signal,
      )
      if (server.child.exit !== undefined) throw new BenchFailure(`${server.name} stopped during the run (${server.child.exit})`)
      await assertClean(result, server.name, scenario, server.url, setup.key)
      return result
    }
    process.stdout.write(`bench: ${scenario.label}: warm-up ${mode.warmupS} s each`)
    const warmup = { baseline: await measure(servers[0], mode.warmupS), service: await measure(servers[1], mode.warmupS) }
    const rounds: Round[] = []
    for (let index = 0; index < mode.rounds; index++) {
      const baselineResult = await measure(servers[0], mode.roundS)
      const serviceResult = await measure(servers[1], mode.roundS)
      const ratio = round(serviceResult.requestsPerSecond / baselineResult.requestsPerSecond, 3)
      rounds.push({ baseline: baselineResult, service: serviceResult, ratio })
      process.stdout.write(`, round ${index + 1} ${ratio.toFixed(2)}`)
    }
    process.stdout.write('\n')
    const memory = (field: 'VmHWM' | 'VmRSS') => ({
      service: megabytes(procStatusKb(setup.service.pid, field)),
      baseline: megabytes(procStatusKb(baseline.pid, field)),
    })
    const report = summarise(scenario, warmup, rounds, { peakRssMb: memory('VmHWM'), rssAfterMb: memory('VmRSS') })
    reports.push(report)
    printScenario(report)
  }
  printSummary(reports)

  const peakRss = { service: Math.max(...reports.map((r) => r.peakRssMb.service)), baseline: Math.max(...reports.map((r) => r.peakRssMb.baseline)) }
  const allPass = reports.every((r) => r.pass.ratio && r.pass.p99 && r.pass.rss)
  const files = resultFiles(startedAt, mode.name === 'quick' ? '-quick' : '')
  fs.writeFileSync(
    files.json,
    JSON.stringify({ ...header, targets: { p99LimitMs: P99_LIMIT_MS, rssLimitMb: RSS_LIMIT_MB }, peakRssMb: peakRss, allTargetsMet: allPass, scenarios: reports }, null, 2) + '\n',
  )
  fs.writeFileSync(
    files.svg,
    benchmarkSvg({
      title: `petstore benchmark, ${mode.name} run, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      subtitle: `${mode.rounds} interleaved rounds of ${mode.roundS} s per server, ${CONNECTIONS} connections, ${count(SEED_PETS)} pets; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
      scenarios: reports.map((r) => ({
        label: r.label.replace(/^(GET|POST) /, '$1 ').replace('?status=available&limit=100', '?status=…&limit=100'),
        targetRatio: r.targetRatio,
        ratio: r.median.ratio,
        baseline: { requestsPerSecond: r.median.baseline.requestsPerSecond, p99Ms: r.median.baseline.p99Ms },
        service: { requestsPerSecond: r.median.service.requestsPerSecond, p99Ms: r.median.service.p99Ms },
      })),
      p99LimitMs: P99_LIMIT_MS,
      rssMb: { ...peakRss, limit: RSS_LIMIT_MB },
    }),
  )
  console.log(`\n${allPass ? 'ALL TARGETS MET' : 'TARGETS MISSED: see MISS above'}`)
  console.log(`Results: ${path.relative(process.cwd(), files.json)}\nChart:   ${path.relative(process.cwd(), files.svg)}`)
  await stopChild(baseline)
  return allPass
}

async function soak(mode: Mode, setup: Setup, signal: AbortSignal, startedAt: Date, header: object): Promise<boolean> {
  console.log(`bench: soak: mixed traffic (${SCENARIOS.map((s) => `${s.soakWeight} % ${s.label}`).join(', ')}) for ${mode.soakS} s`)
  const samples: { atS: number; rssMb: number }[] = []
  const start = Date.now()
  const sample = () => {
    try {
      samples.push({ atS: round((Date.now() - start) / 1000, 1), rssMb: megabytes(procStatusKb(setup.service.pid, 'VmRSS')) })
    } catch {
      // The service is gone; the load run reports it.
    }
  }
  sample()
  const sampler = setInterval(sample, RSS_SAMPLE_MS)
  const result = await runLoad(
    {
      baseUrl: setup.serviceUrl,
      key: setup.key,
      scenario: 'mixed',
      connections: CONNECTIONS,
      durationS: mode.soakS,
      idsFile: setup.idsFile,
      namePrefix: 'soak',
      tool: 'autocannon',
    },
    signal,
  ).finally(() => clearInterval(sampler))
  sample()
  if (setup.service.exit !== undefined) throw new BenchFailure(`the service stopped during the soak (${setup.service.exit})`)
  await assertClean(result, 'service', undefined, setup.serviceUrl, setup.key)

  const settledAtS = mode.soakS > 2 * SOAK_SETTLED_AFTER_S ? SOAK_SETTLED_AFTER_S : 0
  const settled = samples.find((s) => s.atS >= settledAtS) ?? samples[0]
  const end = samples.at(-1)
  if (settled === undefined || end === undefined) throw new BenchFailure('no RSS samples')
  const growthPct = round(((end.rssMb - settled.rssMb) / settled.rssMb) * 100, 1)
  const peakRssMb = megabytes(procStatusKb(setup.service.pid, 'VmHWM'))
  const pass = { growth: growthPct < SOAK_RSS_GROWTH_LIMIT_PCT, p99: result.latencyMs.p99 <= P99_LIMIT_MS, rss: peakRssMb <= RSS_LIMIT_MB }
  console.log(
    [
      '',
      `Soak, mixed traffic, ${CONNECTIONS} connections, ${result.durationS} s`,
      `  ${count(result.requests)} requests, ${count(result.requestsPerSecond)} req/s, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms (target ≤ ${P99_LIMIT_MS} ms, ${verdict(pass.p99)}), no errors`,
      `  RSS ${settled.rssMb.toFixed(1)} MB at ${settled.atS} s → ${end.rssMb.toFixed(1)} MB at ${end.atS} s: growth ${growthPct} %   target < ${SOAK_RSS_GROWTH_LIMIT_PCT} %   ${verdict(pass.growth)}`,
      `  peak RSS ${peakRssMb.toFixed(1)} MB   target ≤ ${RSS_LIMIT_MB} MB   ${verdict(pass.rss)}`,
    ].join('\n'),
  )
  const files = resultFiles(startedAt, mode.name === 'soak' ? '-soak' : '-quick-soak')
  fs.writeFileSync(
    files.json,
    JSON.stringify({ ...header, soak: { result, settledAtS: settled.atS, growthPct, peakRssMb, pass, samples } }, null, 2) + '\n',
  )
  fs.writeFileSync(
    files.svg,
    soakSvg({
      title: `petstore soak, ${mode.soakS} s, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      subtitle: `Mixed traffic at ${CONNECTIONS} connections: ${count(result.requestsPerSecond)} req/s, p99 ${result.latencyMs.p99} ms; RSS growth ${growthPct} % (limit ${SOAK_RSS_GROWTH_LIMIT_PCT} %) ${verdict(pass.growth)}`,
      samples,
      settledAtS,
      growthLimitPct: SOAK_RSS_GROWTH_LIMIT_PCT,
    }),
  )
  console.log(`Results: ${path.relative(process.cwd(), files.json)}\nChart:   ${path.relative(process.cwd(), files.svg)}`)
  return pass.growth && pass.p99 && pass.rss
}

async function main(): Promise<number> {
  let mode: Mode
  let buildFirst: boolean
  let tool: LoadOptions['tool']
  try {
    const { values } = parseArgs({
      options: {
        quick: { type: 'boolean' },
        soak: { type: 'boolean' },
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
    const quick = values.quick === true
    mode = values.soak === true ? (quick ? MODES.quickSoak : MODES.soak) : quick ? MODES.quick : MODES.full
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
  const stop = new AbortController()
  const hardCleanup = () => {
    for (const child of children) child.process.kill('SIGKILL')
    for (const child of loadGenerators) child.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
  process.on('exit', hardCleanup)
  let signalled = false
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (signalled) process.exit(130)
      signalled = true
      console.error(`\nbench: ${signal}: stopping the load and the servers…`)
      stop.abort(new BenchFailure(`interrupted by ${signal}`))
    })
  }
  setTimeout(() => {
    console.error(`bench: still running after ${mode.hardLimitS} s; killing everything and giving up.`)
    process.exit(3)
  }, mode.hardLimitS * 1000).unref()

  const loadS = mode.soakS > 0 ? mode.soakS : SCENARIOS.length * (2 * mode.warmupS + 2 * mode.rounds * mode.roundS)
  console.log(`bench: ${mode.name} run; about ${Math.ceil(loadS / 60)} min of load plus set-up; bounded at ${mode.hardLimitS} s`)
  let setup: Setup | undefined
  try {
    if (buildFirst) await build()
    console.log(`bench: load generator: ${tool}${tool === 'wrk' ? ' (autocannon for the mixed soak)' : ' (install wrk to spare the shared CPU)'}`)
    setup = { ...(await setUp(dir, stop.signal)), tool }
    const running = setup
    void running.service.exited.then(() => stop.abort(new BenchFailure(`petstore serve stopped unexpectedly (${running.service.exit})`)))
    const header = {
      startedAt: startedAt.toISOString(),
      mode: mode.name,
      revision: await revision(),
      machine: machine(),
      settings: { loadGenerator: mode.soakS > 0 ? 'autocannon' : tool, connections: CONNECTIONS, rounds: mode.rounds, roundS: mode.roundS, warmupS: mode.warmupS, soakS: mode.soakS, database: 'sqlite', logLevel: 'info' },
      seeding: setup.seeding,
    }
    const pass = mode.soakS > 0 ? await soak(mode, setup, stop.signal, startedAt, header) : await benchmark(mode, setup, stop.signal, startedAt, header)
    console.log(`bench: total ${seconds(Date.now() - startedAt.getTime())}`)
    return pass ? 0 : 1
  } catch (error) {
    const reason: unknown = stop.signal.aborted ? stop.signal.reason : error
    if (signalled) return 130
    console.error(`bench: FAILED: ${reason instanceof Error ? reason.message : String(reason)}`)
    if (setup !== undefined) console.error(`last lines of the service log:\n${logTail(setup.serviceLog)}`)
    return 3
  } finally {
    await Promise.all([...children].map(stopChild))
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

process.exit(await main())
