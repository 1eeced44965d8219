// The soak test: one `petstore serve` process on a fresh SQLite database under a steady mixed load for
// minutes, to catch what short tests miss: errors that appear only after a while, and memory that keeps
// growing. Not part of `npm test`. Usage: `npm run soak [-- --duration 30s|5m]` after `npm run build`.
import autocannon from 'autocannon'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import readline from 'node:readline'
import { parseArgs } from 'node:util'
import {
  Interrupted,
  type PetstoreProcess,
  ROOT,
  createKey,
  createPets,
  describeExit,
  guardRun,
  logTail,
  procStatusKb,
  round,
  startPetstore,
  stopProcess,
} from './petstore-process.js'

const RESULTS_DIR = path.join(ROOT, 'soak-results')

const CONNECTIONS = 50
const PEAK_SECONDS = 10
const SEED_PETS = 1_000
const SEED_CONCURRENCY = 10
const TARGET_SHARE_OF_PEAK = 0.7
const RSS_SAMPLE_MS = 5_000
/** RSS growth is judged from this point of phase 2 on: the first minute fills caches and JIT code. */
const RSS_SETTLED_AFTER_S = 60
const RSS_GROWTH_LIMIT_PCT = 10
const KILL_AFTER_MS = 10_000
/** Setup, phase 1, shutdown and cleanup must all fit in this beyond DURATION. */
const TIME_BOUND_SLACK_MS = 60_000
const DEFAULT_DURATION_S = 300

const USAGE = `Usage: npm run soak [-- --duration 30s|5m]

Starts \`petstore serve\` from dist/ on a fresh SQLite database, measures the peak throughput of a mixed
workload for ${PEAK_SECONDS} s, then holds ${TARGET_SHARE_OF_PEAK * 100} % of it for the duration
(default ${DEFAULT_DURATION_S / 60} minutes) while sampling the server's memory. Exit code 0 on PASS, 1 on FAIL.`

const PET_STATUSES = ['available', 'pending', 'sold', undefined] as const

/** A valid createPet body; every fourth pet has no status, as clients may send. */
function petBody(n: number): string {
  return JSON.stringify({ name: `soak-${n}`, categoryId: 1 + (n % 50), status: PET_STATUSES[n % PET_STATUSES.length] })
}

/** Requests written, responses per operation and status, and the first few failures verbatim. */
interface Tally {
  // autocannon's own `requests.sent` is off by the per-connection rate when a rate is set.
  sent: number
  byOperation: Record<string, Record<string, number>>
  failures: string[]
}

function record(tally: Tally, operation: string, status: number, body: string): void {
  const counts = (tally.byOperation[operation] ??= {})
  counts[status] = (counts[status] ?? 0) + 1
  if ((status < 200 || status > 299) && tally.failures.length < 5) {
    tally.failures.push(`${operation} → ${status}: ${body.slice(0, 200)}`)
  }
}

/**
 * The mix, as one autocannon request whose setupRequest draws an operation at random for every
 * request. One instance keeps one pool of connections, one `overallRate` and one set of latency and
 * status statistics for the whole workload, and the shares hold at any rate; several instances (one
 * per operation) would each need a slice of the connections and the rate, and their histograms merged.
 */
function mixedWorkload(key: string, petIds: readonly string[], tally: Tally): autocannon.RequestSpec[] {
  const authorization = `Bearer ${key}`
  let created = 0
  // Ids are drawn only among pets that exist, so a 404 is a real fault, never noise.
  const randomId = () => petIds[Math.floor(Math.random() * petIds.length)] ?? ''
  // Every request gets fresh headers: autocannon writes Content-Length into the headers object it is
  // given, and a GET reusing a POST's headers would announce a body it never sends.
  const operations: { name: string; weight: number; request: () => autocannon.Request }[] = [
    { name: 'GET /v1/pets?limit=20', weight: 60, request: () => ({ method: 'GET', path: '/v1/pets?limit=20', headers: { authorization }, body: undefined }) },
    {
      name: 'GET /v1/pets?status=available&limit=100',
      weight: 15,
      request: () => ({ method: 'GET', path: '/v1/pets?status=available&limit=100', headers: { authorization }, body: undefined }),
    },
    { name: 'GET /v1/pets/{id}', weight: 10, request: () => ({ method: 'GET', path: `/v1/pets/${randomId()}`, headers: { authorization }, body: undefined }) },
    {
      name: 'POST /v1/pets',
      weight: 15,
      request: () => ({
        method: 'POST',
        path: '/v1/pets',
        headers: { authorization, 'content-type': 'application/json' },
        body: petBody(SEED_PETS + created++),
      }),
    },
  ]
  const totalWeight = operations.reduce((sum, operation) => sum + operation.weight, 0)
  const draw = () => {
    let point = Math.random() * totalWeight
    for (const operation of operations) {
      point -= operation.weight
      if (point < 0) return operation
    }
    return operations[0] as (typeof operations)[number]
  }
  return [
    {
      setupRequest(request, context) {
        const operation = draw()
        tally.sent++
        context.operation = operation.name
        return { ...request, ...operation.request() }
      },
      // With one request in flight per connection, the context still names the operation answered.
      onResponse(status, body, context) {
        record(tally, typeof context.operation === 'string' ? context.operation : '?', status, body)
      },
    },
  ]
}

interface LoadRun {
  result: autocannon.Result
  /** Socket errors by code (ECONNRESET, timeouts…). */
  socketErrors: Record<string, number>
  tally: Tally
}

/** One autocannon run over 127.0.0.1; `stop` ends it early (within a second). */
function runLoad(options: Omit<autocannon.Options, 'requests'>, key: string, petIds: readonly string[], stop: AbortSignal): Promise<LoadRun> {
  const tally: Tally = { sent: 0, byOperation: {}, failures: [] }
  const socketErrors: Record<string, number> = {}
  let instance: autocannon.Instance | undefined
  const halt = () => instance?.stop()
  return new Promise<LoadRun>((resolve, reject) => {
    // Latency is recorded as measured. At a set rate, autocannon's coordinated-omission correction assumes
    // one request per millisecond per connection whatever the rate, and pads a 50 ms answer with 49
    // invented ones (it refuses the option when no rate is set).
    const run = {
      ...options,
      ignoreCoordinatedOmission: options.overallRate !== undefined,
      requests: mixedWorkload(key, petIds, tally),
    }
    instance = autocannon(run, (error, result) => {
      stop.removeEventListener('abort', halt)
      if (error === null) resolve({ result, socketErrors, tally })
      else reject(error)
    })
    instance.on('reqError', (error: NodeJS.ErrnoException) => {
      const kind = error.code ?? error.message
      socketErrors[kind] = (socketErrors[kind] ?? 0) + 1
    })
    if (stop.aborted) halt()
    else stop.addEventListener('abort', halt, { once: true })
  })
}

/** Lines in the server log, and how many are at pino's error or fatal level. */
async function scanLog(logPath: string): Promise<{ lines: number; errorLines: number }> {
  let lines = 0
  let errorLines = 0
  for await (const line of readline.createInterface({ input: fs.createReadStream(logPath), crlfDelay: Infinity })) {
    lines++
    if (line.includes('"level":50') || line.includes('"level":60')) errorLines++
  }
  return { lines, errorLines }
}

interface RssSample {
  /** Seconds since phase 2 started. */
  atS: number
  rssKb: number
}

function statusClasses(result: autocannon.Result): Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx', number> {
  const classes = { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }
  for (const [status, { count }] of Object.entries(result.statusCodeStats)) {
    const name = `${status[0]}xx`
    if (name in classes) classes[name as keyof typeof classes] += count
  }
  return classes
}

/** What the summary says about one autocannon run. */
function describeRun(run: LoadRun) {
  const { result } = run
  return {
    durationS: result.duration,
    requestsSent: run.tally.sent,
    requestsCompleted: result.requests.total,
    requestsPerSecond: round(result.requests.total / result.duration, 1),
    statusClasses: statusClasses(result),
    errors: result.non2xx + result.errors + result.mismatches,
    non2xx: result.non2xx,
    socketErrors: result.errors,
    timeouts: result.timeouts,
    socketErrorsByKind: run.socketErrors,
    firstFailures: run.tally.failures,
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
    byOperation: run.tally.byOperation,
  }
}

const count = (n: number) => n.toLocaleString('en-US')
const mib = (kb: number) => `${(kb / 1024).toFixed(1)} MiB`

function parseDurationSeconds(text: string): number {
  const match = /^([1-9][0-9]{0,4})(s|m)$/.exec(text)
  const seconds = match === null ? Number.NaN : Number(match[1]) * (match[2] === 'm' ? 60 : 1)
  if (!(seconds >= 10 && seconds <= 86_400)) throw new Error(`--duration must be like 30s or 5m, from 10s to 24h; got "${text}"`)
  return seconds
}

async function main(): Promise<number> {
  let durationS: number
  try {
    const { values } = parseArgs({ options: { duration: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true })
    if (values.help === true) {
      console.log(USAGE)
      return 0
    }
    durationS = values.duration === undefined ? DEFAULT_DURATION_S : parseDurationSeconds(values.duration)
  } catch (error) {
    console.error(`soak: ${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (!fs.existsSync(path.join(ROOT, 'dist', 'cli.js'))) {
    console.error('soak: dist/ is missing; run `npm run build` first.')
    return 1
  }
  if (!fs.existsSync('/proc/self/status')) {
    console.error('soak: reads server memory from /proc, so it runs on Linux only.')
    return 1
  }

  const startedAt = new Date()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-soak-'))
  let server: PetstoreProcess | undefined
  // Last resort when the orderly path cannot run: a second Ctrl-C, the time bound, an unexpected exit.
  const { stop } = guardRun({
    name: 'soak',
    hardCleanup: () => {
      if (server !== undefined && server.exit === undefined) server.child.kill('SIGKILL')
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: durationS * 1000 + TIME_BOUND_SLACK_MS,
    timeLimitExitCode: 1,
    timeLimitMessage: `still running ${TIME_BOUND_SLACK_MS / 1000} s after the duration; killing the server and giving up.`,
  })

  // Only what the run needs: nothing from this shell (a DATABASE_URL, a PETSTORE_ENV) leaks in.
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}` }
  const logPath = path.join(dir, 'server.log')
  try {
    const key = await createKey(env, 'soak')
    server = await startPetstore({
      cwd: dir,
      env: {
        ...env,
        LOG_LEVEL: 'info',
        // Rate limiting stays on, so its cost is part of what is measured, but never rejects.
        RATE_LIMIT_PER_KEY: '100000000',
        SHUTDOWN_TIMEOUT_MS: '8000',
      },
      metrics: true,
      logPath,
      detached: true,
      timeoutMs: 15_000,
    })
    const running = server
    void running.exited.then((exit) => stop.abort(new Error(`petstore serve stopped unexpectedly (${describeExit(exit)})`)))
    console.log(`soak: server pid ${running.pid} on ${running.baseUrl}, database and log in ${dir}`)

    const petIds = await createPets(running.baseUrl, key, {
      count: SEED_PETS,
      concurrency: SEED_CONCURRENCY,
      body: petBody,
      signal: stop.signal,
    })
    stop.signal.throwIfAborted()
    console.log(`soak: seeded ${count(petIds.length)} pets; phase 1: peak throughput for ${PEAK_SECONDS} s with ${CONNECTIONS} connections…`)

    const loadOptions = { url: running.baseUrl, connections: CONNECTIONS }
    const peak = await runLoad({ ...loadOptions, duration: PEAK_SECONDS }, key, petIds, stop.signal)
    stop.signal.throwIfAborted()
    const peakRate = peak.result.requests.total / peak.result.duration
    const targetRate = Math.max(1, Math.round(peakRate * TARGET_SHARE_OF_PEAK))
    console.log(
      `soak: peak ${count(Math.round(peakRate))} req/s; phase 2: ${count(targetRate)} req/s for ${durationS} s, server RSS every ${RSS_SAMPLE_MS / 1000} s…`,
    )

    const samples: RssSample[] = [{ atS: 0, rssKb: procStatusKb(running.pid, 'VmRSS') }]
    const phase2Start = Date.now()
    const sampleRss = () => {
      try {
        samples.push({ atS: round((Date.now() - phase2Start) / 1000, 1), rssKb: procStatusKb(running.pid, 'VmRSS') })
      } catch {
        // The server is gone; the stop signal says so and ends the run.
      }
    }
    const sampler = setInterval(sampleRss, RSS_SAMPLE_MS)
    const soak = await runLoad({ ...loadOptions, duration: durationS, overallRate: targetRate }, key, petIds, stop.signal).finally(() =>
      clearInterval(sampler),
    )
    stop.signal.throwIfAborted()
    if (Date.now() - phase2Start - (samples.at(-1)?.atS ?? 0) * 1000 > 1_000) sampleRss()

    await stopProcess(running, { killAfterMs: KILL_AFTER_MS })
    const log = await scanLog(logPath)

    const start = samples[0] as RssSample
    const end = samples.at(-1) as RssSample
    const settled = durationS > RSS_SETTLED_AFTER_S ? (samples.find((sample) => sample.atS >= RSS_SETTLED_AFTER_S) ?? start) : start
    const maxKb = Math.max(...samples.map((sample) => sample.rssKb))
    const growthPct = round(((end.rssKb - settled.rssKb) / settled.rssKb) * 100, 1)
    const phase1 = describeRun(peak)
    const phase2 = describeRun(soak)

    const reasons: string[] = []
    if (phase2.errors > 0) reasons.push(`${count(phase2.errors)} errors in phase 2 (${count(phase2.non2xx)} non-2xx, ${count(phase2.socketErrors)} socket errors)`)
    if (phase1.errors > 0) reasons.push(`${count(phase1.errors)} errors in phase 1 (${count(phase1.non2xx)} non-2xx, ${count(phase1.socketErrors)} socket errors)`)
    if (growthPct >= RSS_GROWTH_LIMIT_PCT) reasons.push(`server RSS grew ${growthPct} % (limit ${RSS_GROWTH_LIMIT_PCT} %)`)
    const pass = reasons.length === 0

    const summary = {
      startedAt: startedAt.toISOString(),
      node: process.version,
      setup: { seededPets: petIds.length, connections: CONNECTIONS, targetShareOfPeak: TARGET_SHARE_OF_PEAK, database: 'sqlite', logLevel: 'info' },
      phase1: { ...phase1, peakRequestsPerSecond: round(peakRate, 1) },
      phase2: {
        ...phase2,
        requestedDurationS: durationS,
        targetRequestsPerSecond: targetRate,
        achievedShareOfTargetPct: round((phase2.requestsPerSecond / targetRate) * 100, 1),
      },
      rss: {
        startKb: start.rssKb,
        endKb: end.rssKb,
        maxKb,
        baselineKb: settled.rssKb,
        baselineAtS: settled.atS,
        growthPct,
        growthSinceStartPct: round(((end.rssKb - start.rssKb) / start.rssKb) * 100, 1),
        samples,
      },
      server: { logLines: log.lines, errorLogLines: log.errorLines, shutdown: describeExit(running.exit) },
      verdict: pass ? 'PASS' : 'FAIL',
      reasons,
    }

    const classes = (c: ReturnType<typeof statusClasses>) =>
      `2xx ${count(c['2xx'])} · 3xx ${count(c['3xx'])} · 4xx ${count(c['4xx'])} · 5xx ${count(c['5xx'])}${c['1xx'] > 0 ? ` · 1xx ${count(c['1xx'])}` : ''}`
    const lines = [
      '',
      `Phase 1 (peak, ${phase1.durationS} s, ${CONNECTIONS} connections): ${count(phase1.requestsCompleted)} requests, ` +
        `${count(Math.round(peakRate))} req/s, p50 ${phase1.latencyMs.p50} ms, p99 ${phase1.latencyMs.p99} ms, errors ${count(phase1.errors)}`,
      `Phase 2 (soak, ${phase2.durationS} s at ${TARGET_SHARE_OF_PEAK * 100} % of peak):`,
      `  requests sent    ${count(phase2.requestsSent)}, answered ${count(phase2.requestsCompleted)} (the difference was in flight when the load stopped)`,
      `  status classes   ${classes(phase2.statusClasses)}`,
      `  errors           ${count(phase2.errors)} (non-2xx ${count(phase2.non2xx)}, socket errors ${count(phase2.socketErrors)}, of which timeouts ${count(phase2.timeouts)})`,
      `  rate             ${count(phase2.requestsPerSecond)} req/s achieved vs ${count(targetRate)} req/s target (${summary.phase2.achievedShareOfTargetPct} %)`,
      `  latency          p50 ${phase2.latencyMs.p50} ms, p99 ${phase2.latencyMs.p99} ms, max ${phase2.latencyMs.max} ms`,
      `  by operation     ${Object.entries(phase2.byOperation)
        .map(([name, statuses]) => `${name} ${count(Object.values(statuses).reduce((a, b) => a + b, 0))}`)
        .join(' · ')}`,
      `  server RSS       start ${mib(start.rssKb)}, end ${mib(end.rssKb)}, max ${mib(maxKb)}; growth ${growthPct} % ` +
        (settled === start
          ? '(end vs start)'
          : `(end vs ${mib(settled.rssKb)} at ${settled.atS} s; ${summary.rss.growthSinceStartPct} % vs start)`),
      `  server log       ${count(log.lines)} lines, ${count(log.errorLines)} at error level; shutdown: ${describeExit(running.exit)}`,
      ...[...phase1.firstFailures, ...phase2.firstFailures].map((failure) => `  failure          ${failure}`),
      ...Object.entries({ ...phase1.socketErrorsByKind, ...phase2.socketErrorsByKind }).map(([kind, n]) => `  socket error     ${kind} ×${count(n)}`),
      pass
        ? `PASS: zero errors, server RSS growth ${growthPct} % < ${RSS_GROWTH_LIMIT_PCT} %`
        : `FAIL: ${reasons.join('; ')}`,
    ]
    console.log(lines.join('\n'))

    fs.mkdirSync(RESULTS_DIR, { recursive: true })
    const resultsFile = path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`)
    fs.writeFileSync(resultsFile, JSON.stringify(summary, null, 2) + '\n')
    console.log(`Results: ${path.relative(process.cwd(), resultsFile)}`)
    return pass ? 0 : 1
  } catch (error) {
    if (error instanceof Interrupted) return 130
    console.error(`soak: ${error instanceof Error ? error.message : String(error)}`)
    if (fs.existsSync(logPath)) console.error(`last lines of the server log:\n${logTail(logPath)}`)
    return 1
  } finally {
    if (server !== undefined) await stopProcess(server, { killAfterMs: KILL_AFTER_MS })
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

process.exit(await main())
