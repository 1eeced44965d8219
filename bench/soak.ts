// The soak: `petstore serve` under a steady mixed load for minutes, on each engine in turn, to catch what
// the bench's one-second rounds cannot: memory that keeps growing, a read cache past its budget, a tail
// that lengthens, errors that come only after a while. Not part of `npm test`.
// `npm run soak [-- --minutes N] [-- --engine sqlite|postgres]`; bench/README.md (The soak) says how to read it.
// The service is set up as the bench sets it up (setup.ts: dist/ compiled if stale, logging at info to a
// file, metrics on, 10,000 pets through the API), the PostgreSQL server is the bench's embedded one; the
// verdict is soak-verdict.ts.
import autocannon from 'autocannon'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import readline from 'node:readline'
import { parseArgs } from 'node:util'
import { type EmbeddedServer, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'
import { type NodeProcess, describeExit, guardRun, logTail, procStatusKb, round, stopProcess } from '../scripts/petstore-process.js'
import { type EngineName, machine, megabytes, resultFile, revision, seconds } from './report.js'
import { petBody } from './scenarios.js'
import { cpuInUse } from './rounds.js'
import { type Engine, type Setup, build, refusalCounters, setUp } from './setup.js'
import { type Answers, SOAK_BOUNDS, type SoakSample, type SoakVerdict, judgeSoak, p99Between } from './soak-verdict.js'

const DEFAULT_MINUTES = 3
/** Moderate: enough for the held rate, far from the bench's 50. */
const CONNECTIONS = 32
const PEAK_S = 10
/** The held load's share of the peak the mix reached: headroom for a shared machine's noise. */
const SHARE_OF_PEAK = 0.5
const SAMPLE_MS = 5_000
const KILL_AFTER_MS = 10_000
/** Beyond the load: set-up (build, PostgreSQL, seeding), the peak, shutdown, per engine. */
const SLACK_PER_ENGINE_S = 240
/** The hot ids most gets ask for, so that the read cache keeps answers, as under real traffic. */
const HOT_IDS = 1_000
/** Page walks in progress at once; a walk's next page is asked for by whichever connection comes next. */
const MAX_WALKS = 64
const WALK_LIMITS = [10, 50, 100] as const
const STATUSES = ['available', 'pending', 'sold'] as const

const USAGE = `Usage: npm run soak [-- --minutes N] [-- --engine sqlite|postgres] [-- --no-build]

Per engine (both unless --engine), \`petstore serve\` set up as the bench sets it up (10,000 pets, logging at info,
metrics on) under a mixed load: ${PEAK_S} s at full speed with ${CONNECTIONS} connections to find the peak, then
${SHARE_OF_PEAK * 100} % of that rate for N minutes (default ${DEFAULT_MINUTES}), sampling the server's RSS and its read cache every ${SAMPLE_MS / 1000} s.
Judged: RSS flat after the first third (the last third's highest ≤ the highest before it + ${SOAK_BOUNDS.rssSlackMb} MB),
the read cache never over its budget, p99 of the last minute ≤ ${SOAK_BOUNDS.p99Factor} × the first's, every answer 2xx.
Writes bench/results/<timestamp>-soak.json. Exit code: 0 met, 1 missed, 2 usage, 3 the soak itself failed.`

/** One operation of the mix, with its share of the requests. */
interface Operation {
  name: string
  weight: number
  request: () => autocannon.Request
  /** What its answer tells the next requests: a walk's next page, a keyed create to replay. */
  answered?: (status: number, headers: Record<string, string | string[]>, context: autocannon.Context) => void
}

/** Answers by operation and status, and the first few failures verbatim. */
interface Tally {
  byOperation: Record<string, Record<string, number>>
  failures: string[]
}

/**
 * The mix, as one autocannon request whose setupRequest draws an operation for every request: gets of
 * seeded ids (most from a hot thousand), list pages with and without a status, page walks that follow
 * the `Link` of the page before, creates without and with an `Idempotency-Key`, and replays of keyed
 * creates already answered (201 again, replayed).
 */
function mixedWorkload(key: string, ids: readonly string[], engine: EngineName, tally: Tally): autocannon.RequestSpec[] {
  const authorization = `Bearer ${key}`
  const get = (path: string): autocannon.Request => ({ method: 'GET', path, headers: { authorization }, body: undefined })
  const pick = <T>(values: readonly T[]): T => values[Math.floor(Math.random() * values.length)] as T
  const hot = ids.slice(0, HOT_IDS)
  const walks: string[] = []
  const answeredKeys: { key: string; body: string }[] = []
  let created = 0
  const create = (headers: Record<string, string>, body: string): autocannon.Request => ({
    method: 'POST',
    path: '/v1/pets',
    headers: { authorization, 'content-type': 'application/json', ...headers },
    body,
  })
  const operations: Operation[] = [
    { name: 'GET /v1/pets/{id} (hot)', weight: 20, request: () => get(`/v1/pets/${pick(hot)}`) },
    { name: 'GET /v1/pets/{id}', weight: 15, request: () => get(`/v1/pets/${pick(ids)}`) },
    { name: 'GET /v1/pets?limit=20', weight: 15, request: () => get('/v1/pets?limit=20') },
    { name: 'GET /v1/pets?status&limit=100', weight: 10, request: () => get(`/v1/pets?status=${pick(STATUSES)}&limit=100`) },
    {
      name: 'GET /v1/pets?cursor (walk)',
      weight: 20,
      request: () => {
        const next = walks.shift()
        if (next !== undefined) return get(next)
        const status = pick([...STATUSES, undefined])
        return get(`/v1/pets?limit=${pick(WALK_LIMITS)}${status === undefined ? '' : `&status=${status}`}`)
      },
      answered: (status, headers) => {
        const link = headers.link ?? headers.Link
        const next = /<([^>]+)>\s*;\s*rel="?next"?/.exec(Array.isArray(link) ? link.join(', ') : (link ?? ''))?.[1]
        if (status === 200 && next !== undefined && walks.length < MAX_WALKS) walks.push(new URL(next).pathname + new URL(next).search)
      },
    },
    { name: 'POST /v1/pets', weight: 14, request: () => create({}, petBody(created++, `soak-${engine}`)) },
    {
      name: 'POST /v1/pets (Idempotency-Key)',
      weight: 4,
      request: () => create({ 'idempotency-key': `soak-${engine}-${created}` }, petBody(created++, `soak-${engine}-keyed`)),
      answered: (status, _headers, context) => {
        if (status === 201 && typeof context.key === 'string' && typeof context.body === 'string' && answeredKeys.length < 1_000) {
          answeredKeys.push({ key: context.key, body: context.body })
        }
      },
    },
    {
      name: 'POST /v1/pets (replay)',
      weight: 2,
      request: () => {
        // Only keys already answered: a replay of one still in flight would be answered 409, rightly.
        const earlier = answeredKeys.length === 0 ? undefined : pick(answeredKeys)
        if (earlier === undefined) return create({}, petBody(created++, `soak-${engine}`))
        return create({ 'idempotency-key': earlier.key }, earlier.body)
      },
    },
  ]
  const totalWeight = operations.reduce((sum, operation) => sum + operation.weight, 0)
  const draw = () => {
    let point = Math.random() * totalWeight
    for (const operation of operations) {
      point -= operation.weight
      if (point < 0) return operation
    }
    return operations[0] as Operation
  }
  return [
    {
      setupRequest(request, context) {
        const operation = draw()
        const built = operation.request()
        context.operation = operation.name
        const idempotencyKey = built.headers?.['idempotency-key']
        if (idempotencyKey !== undefined) {
          context.key = idempotencyKey
          context.body = built.body
        }
        // Fresh headers each time: autocannon writes Content-Length into the object it is given.
        return { ...request, ...built }
      },
      // One request in flight per connection: the context still names the operation answered.
      onResponse(status, body, context, headers) {
        const name = typeof context.operation === 'string' ? context.operation : '?'
        const counts = (tally.byOperation[name] ??= {})
        counts[status] = (counts[status] ?? 0) + 1
        if ((status < 200 || status > 299) && tally.failures.length < 5) tally.failures.push(`${name} → ${status}: ${body.slice(0, 200)}`)
        operations.find((operation) => operation.name === name)?.answered?.(status, headers, context)
      },
    },
  ]
}

interface LoadRun {
  result: autocannon.Result
  socketErrors: Record<string, number>
  tally: Tally
  answers: Answers
}

/** One autocannon run of the mix in this process, every answer's time and latency kept; `stop` ends it early. */
function runLoad(options: autocannon.Options, setup: Setup, stop: AbortSignal): Promise<LoadRun> {
  const tally: Tally = { byOperation: {}, failures: [] }
  const socketErrors: Record<string, number> = {}
  const answers = { atS: [] as number[], latencyMs: [] as number[] }
  const startedAt = performance.now()
  return new Promise<LoadRun>((resolve, reject) => {
    const halt = () => instance.stop()
    const instance = autocannon(
      {
        ...options,
        // Latency as measured: at a set rate autocannon's coordinated-omission correction assumes one request
        // per millisecond per connection whatever the rate, and would invent answers.
        ignoreCoordinatedOmission: options.overallRate !== undefined,
        timeout: 10,
        requests: mixedWorkload(setup.key, setup.ids, setup.engine.name, tally),
      },
      (error, result) => {
        stop.removeEventListener('abort', halt)
        if (error === null) resolve({ result, socketErrors, tally, answers })
        else reject(error)
      },
    )
    instance.on('response', (_client: unknown, _status: number, _bytes: number, latencyMs: number) => {
      answers.atS.push((performance.now() - startedAt) / 1000)
      answers.latencyMs.push(latencyMs)
    })
    instance.on('reqError', (error: NodeJS.ErrnoException) => {
      const kind = error.code ?? error.message
      socketErrors[kind] = (socketErrors[kind] ?? 0) + 1
    })
    if (stop.aborted) halt()
    else stop.addEventListener('abort', halt, { once: true })
  })
}

/** The read cache's gauges from the service's /metrics, or undefined when it did not answer in time. */
async function readCacheGauges(metricsUrl: string): Promise<{ bytes: number; budget: number; entries: number } | undefined> {
  try {
    const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(2_000) })).text()
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN)
    const figures = { bytes: gauge('petstore_read_cache_bytes'), budget: gauge('petstore_read_cache_budget_bytes'), entries: gauge('petstore_read_cache_entries') }
    return Object.values(figures).every(Number.isFinite) ? figures : undefined
  } catch {
    return undefined
  }
}

/** Lines of the server log at pino's error or fatal level. */
async function errorLogLines(logPath: string): Promise<number> {
  let errors = 0
  for await (const line of readline.createInterface({ input: fs.createReadStream(logPath), crlfDelay: Infinity })) {
    if (line.includes('"level":50') || line.includes('"level":60')) errors++
  }
  return errors
}

const count = (n: number) => Math.round(n).toLocaleString('en-US')
const percent = (share: number) => `${Math.round(share * 100)} %`
const clock = (s: number) => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}`

/** One engine's soak: set-up, the peak, the held load with its samples, the verdict printed. */
async function soakEngine(engine: Engine, minutes: number, dir: string, started: Set<NodeProcess>, signal: AbortSignal) {
  const engineDir = fs.mkdtempSync(path.join(dir, `${engine.name}-`))
  const setup: Setup = { ...(await setUp(engineDir, engine, started, signal)), tool: 'autocannon' }
  const { service } = setup
  const exited = service.exited.then((exit) => {
    throw new Error(`petstore serve stopped during the soak (${describeExit(exit)})`)
  })
  exited.catch(() => {})
  try {
    console.log(`soak ${engine.name}: peak of the mix for ${PEAK_S} s with ${CONNECTIONS} connections…`)
    const peak = await runLoad({ url: service.baseUrl, connections: CONNECTIONS, duration: PEAK_S }, setup, signal)
    signal.throwIfAborted()
    const peakRate = peak.result.requests.total / peak.result.duration
    const rate = Math.max(1, Math.round(peakRate * SHARE_OF_PEAK))
    const durationS = Math.round(minutes * 60)
    console.log(`soak ${engine.name}: peak ${count(peakRate)} req/s; holding ${count(rate)} req/s for ${clock(durationS)}, sampling every ${SAMPLE_MS / 1000} s`)

    // Each sample also says what share of the machine's CPU other processes took since the one before: a
    // tail that moves with it is the machine's, not the service's.
    const samples: (SoakSample & { othersCpuShare?: number })[] = []
    const heldFrom = performance.now()
    let cpuBefore = { ...cpuInUse(), at: heldFrom }
    let load: Promise<LoadRun> | undefined
    const sample = async () => {
      const now = performance.now()
      const atS = round((now - heldFrom) / 1000, 1)
      const rssMb = megabytes(procStatusKb(service.pid, 'VmRSS'))
      const cpu = { ...cpuInUse(), at: now }
      const othersUs = cpu.machineUs - cpuBefore.machineUs - (cpu.benchUs - cpuBefore.benchUs)
      const othersCpuShare = now > cpuBefore.at ? Math.max(0, round(othersUs / ((now - cpuBefore.at) * 1000 * os.cpus().length), 3)) : undefined
      cpuBefore = cpu
      const cache = await readCacheGauges(setup.metricsUrl)
      samples.push({
        atS,
        rssMb,
        ...(cache === undefined ? {} : { cacheBytes: cache.bytes, cacheBudgetBytes: cache.budget }),
        ...(othersCpuShare === undefined ? {} : { othersCpuShare }),
      })
      if (samples.length % 6 === 1) {
        console.log(
          `soak ${engine.name}: ${clock(atS)} RSS ${rssMb.toFixed(1)} MB, read cache ` +
            (cache === undefined ? 'unread' : `${(cache.bytes / 1e6).toFixed(2)} of ${(cache.budget / 1e6).toFixed(2)} MB (${count(cache.entries)} answers)`),
        )
      }
    }
    await sample()
    const sampler = setInterval(() => void sample().catch(() => {}), SAMPLE_MS)
    try {
      load = runLoad({ url: service.baseUrl, connections: CONNECTIONS, duration: durationS, overallRate: rate }, setup, signal)
      await Promise.race([load, exited])
    } finally {
      clearInterval(sampler)
    }
    signal.throwIfAborted()
    await sample()
    const held = await load
    const loadAverage = os.loadavg().map((value) => round(value, 2))
    const refusals = await refusalCounters(setup.metricsUrl)

    await stopProcess(service, { killAfterMs: KILL_AFTER_MS })
    const errorLines = await errorLogLines(setup.serviceLog)
    const failures = { non2xx: held.result.non2xx + peak.result.non2xx, socketErrors: held.result.errors + peak.result.errors }
    const verdict = judgeSoak({ durationS, samples, answers: held.answers, failures })
    const windows = samples.slice(1).map((s, i) => {
      const from = samples[i]?.atS ?? 0
      const { p99Ms, count: answered } = p99Between(held.answers, from, s.atS)
      return { fromS: from, toS: s.atS, requestsPerSecond: round(answered / (s.atS - from), 1), p99Ms: round(p99Ms, 2), othersCpuShare: s.othersCpuShare }
    })
    const { spanS } = verdict.figures
    const othersIn = (from: number, to: number) => {
      const shares = samples.filter((s) => s.atS > from && s.atS <= to + 0.5).flatMap((s) => s.othersCpuShare ?? [])
      return shares.length === 0 ? Number.NaN : round(shares.reduce((a, b) => a + b, 0) / shares.length, 3)
    }
    const othersCpu = { firstSpan: othersIn(0, spanS), lastSpan: othersIn(durationS - spanS, Number.POSITIVE_INFINITY), whole: othersIn(0, Number.POSITIVE_INFINITY) }
    printEngine(engine.name, { peakRate, rate, held, verdict, errorLines, refusals, othersCpu, loadAverage, shutdown: describeExit(service.exit) })
    return {
      engine: engine.name,
      connections: CONNECTIONS,
      peak: { seconds: PEAK_S, requestsPerSecond: round(peakRate, 1), non2xx: peak.result.non2xx, socketErrors: peak.result.errors },
      held: {
        seconds: durationS,
        targetRequestsPerSecond: rate,
        requestsPerSecond: round(held.result.requests.total / held.result.duration, 1),
        answered: held.result.requests.total,
        latencyMs: { p50: held.result.latency.p50, p99: held.result.latency.p99, max: held.result.latency.max },
        non2xx: held.result.non2xx,
        socketErrors: held.socketErrors,
        byOperation: held.tally.byOperation,
        firstFailures: [...peak.tally.failures, ...held.tally.failures],
      },
      samples,
      windows,
      serverErrorLogLines: errorLines,
      refusals,
      othersCpuShare: othersCpu,
      loadAverageAtEnd: loadAverage,
      shutdown: describeExit(service.exit),
      seeding: setup.seeding,
      verdict,
    }
  } catch (error) {
    console.error(`last lines of the service log:\n${logTail(setup.serviceLog)}`)
    throw error
  } finally {
    await stopProcess(service, { killAfterMs: KILL_AFTER_MS })
  }
}

function printEngine(
  engine: EngineName,
  run: {
    peakRate: number
    rate: number
    held: LoadRun
    verdict: SoakVerdict
    errorLines: number
    refusals: string
    othersCpu: { firstSpan: number; lastSpan: number; whole: number }
    loadAverage: number[]
    shutdown: string
  },
): void {
  const { held, verdict } = run
  const answered = (statuses: Record<string, number>) => Object.values(statuses).reduce((a, b) => a + b, 0)
  const lines = [
    '',
    `Soak on ${engine}: peak ${count(run.peakRate)} req/s, held ${count(held.result.requests.total / held.result.duration)} req/s ` +
      `(target ${count(run.rate)}) for ${clock(held.result.duration)}, ${CONNECTIONS} connections; load average at the end ${run.loadAverage.join(' ')}`,
    `  answers     ${count(held.result.requests.total)}, p50 ${held.result.latency.p50} ms, p99 ${held.result.latency.p99} ms, max ${held.result.latency.max} ms`,
    `  by operation ${Object.entries(held.tally.byOperation)
      .map(([name, statuses]) => `${name} ${count(answered(statuses))}`)
      .join(' · ')}`,
    `  server log  ${count(run.errorLines)} lines at error level; shutdown: ${run.shutdown}`,
    `  503s        ${run.refusals}`,
    `  others      other processes took ${percent(run.othersCpu.whole)} of the machine's CPU, ${percent(run.othersCpu.firstSpan)} in the first ` +
      `${verdict.figures.spanS} s and ${percent(run.othersCpu.lastSpan)} in the last`,
    ...[...held.tally.failures].map((failure) => `  failure     ${failure}`),
    ...Object.entries(held.socketErrors).map(([kind, n]) => `  socket error ${kind} ×${count(n)}`),
    ...verdict.checks.map((check) => `  ${check.name}: ${check.figure}   ${check.bound}   ${check.pass ? 'PASS' : 'MISS'}`),
    `  ${verdict.pass ? 'MET' : 'MISSED'}`,
  ]
  console.log(lines.join('\n'))
}

async function main(): Promise<number> {
  let minutes: number
  let engines: EngineName[]
  let buildFirst: boolean
  try {
    const { values } = parseArgs({
      options: { minutes: { type: 'string' }, engine: { type: 'string' }, 'no-build': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    })
    if (values.help === true) {
      console.log(USAGE)
      return 0
    }
    minutes = values.minutes === undefined ? DEFAULT_MINUTES : Number(values.minutes)
    // Under a minute the thirds are too few samples to say anything about memory.
    if (!(minutes >= 1 && minutes <= 60)) throw new Error(`--minutes must be a number from 1 to 60, got "${values.minutes}"`)
    if (values.engine !== undefined && values.engine !== 'sqlite' && values.engine !== 'postgres') {
      throw new Error(`--engine must be sqlite or postgres, got "${values.engine}"`)
    }
    engines = values.engine === undefined ? ['sqlite', 'postgres'] : [values.engine]
    buildFirst = values['no-build'] !== true
  } catch (error) {
    console.error(`soak: ${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (!fs.existsSync('/proc/self/status')) {
    console.error('soak: reads the server memory from /proc, so it runs on Linux only.')
    return 3
  }

  const startedAt = new Date()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-soak-'))
  const started = new Set<NodeProcess>()
  let postgres: EmbeddedServer | undefined
  const hardLimitS = Math.ceil(engines.length * (minutes * 60 + PEAK_S + SLACK_PER_ENGINE_S))
  const { stop, interrupted } = guardRun({
    name: 'soak',
    hardCleanup: () => {
      for (const child of started) child.child.kill('SIGKILL')
      postgres?.kill()
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: hardLimitS * 1000,
    timeLimitExitCode: 3,
    timeLimitMessage: `still running after ${hardLimitS} s; killing everything and giving up.`,
  })
  console.log(`soak: ${engines.join(' then ')}, ${minutes} min of held load each plus set-up; bounded at ${hardLimitS} s; load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')}`)
  try {
    if (buildFirst) await build()
    const header = { startedAt: startedAt.toISOString(), revision: await revision(), machine: machine(), minutes, bounds: SOAK_BOUNDS, sampleMs: SAMPLE_MS, shareOfPeak: SHARE_OF_PEAK }
    const runs = []
    for (const name of engines) {
      let engine: Engine = { name: 'sqlite' }
      if (name === 'postgres') {
        postgres = await startEmbeddedPostgres()
        engine = { name: 'postgres', url: postgres.url }
      }
      runs.push(await soakEngine(engine, minutes, dir, started, stop.signal))
      await postgres?.destroy()
      postgres = undefined
    }
    const met = runs.every((run) => run.verdict.pass)
    const file = resultFile(startedAt, `-soak-${engines.join('-')}`)
    fs.writeFileSync(file, JSON.stringify({ ...header, met, engines: runs }, null, 2) + '\n')
    console.log(`\n${met ? 'SOAK MET ITS BOUNDS' : 'SOAK MISSED: see MISS above'}\nResults: ${path.relative(process.cwd(), file)}\nsoak: total ${seconds(Date.now() - startedAt.getTime())}`)
    return met ? 0 : 1
  } catch (error) {
    if (interrupted()) return 130
    const reason: unknown = stop.signal.aborted ? stop.signal.reason : error
    console.error(`soak: FAILED: ${reason instanceof Error ? reason.message : String(reason)}`)
    return 3
  } finally {
    await Promise.all([...started].map((child) => stopProcess(child, { killAfterMs: KILL_AFTER_MS })))
    await postgres?.destroy().catch(() => postgres?.kill())
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

process.exit(await main())
