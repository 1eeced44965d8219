// The burst: thousands of clients connect to one `petstore serve` at the same instant, each sending
// requests back to back for a few seconds, as after a load balancer's restart or a client fleet's
// reconnect. It asks whether every connection is answered within 10 s (a fast 503 counts), and
// whether the first request after the burst is served as fast as at rest. Not part of `npm test`.
// Usage: `npm run burst [-- --connections 4000 --seconds 8 --workers N]` after `npm run build`.
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { burst } from './burst-client.js'
import { type PetstoreProcess, createKey, createPets, describeExit, guardRun, round, startPetstore, stopProcess } from './petstore-process.js'

/** A connection not answered this long after it was opened is a failure of the burst. */
const ANSWER_WITHIN_MS = 10_000
const REST_REQUESTS = 50
const SEED_PETS = 100

const USAGE = `Usage: npm run burst [-- --connections N] [-- --seconds S] [-- --workers N] [-- --path P] [-- --json]

Starts \`petstore serve\` from dist/ on a fresh SQLite database (LOG_LEVEL=info, to a file), opens N connections
(default 4000) to it at once, each sending GET P (default /v1/pets?limit=20) back to back for S seconds
(default 8), and reports how many were answered within ${ANSWER_WITHIN_MS / 1000} s of opening, by status, the time each
waited for its first answer, the kernel's listen-queue overflows, and the first request after the burst
against one at rest. Environment variables (LISTEN_BACKLOG, OVERLOAD_MAX_EVENT_LOOP_DELAY_MS…) reach the
server. Exit code 0 when every connection was answered in time, 1 when not, 2 a usage error, 3 a failure.`

/** TcpExt counters of the whole machine: connections the kernel refused because a listen queue was full. */
function listenDrops(): { overflows: number; drops: number } {
  const lines = fs.readFileSync('/proc/net/netstat', 'utf8').split('\n').filter((line) => line.startsWith('TcpExt:'))
  const [names, values] = lines.map((line) => line.split(/\s+/).slice(1))
  const value = (name: string) => Number(values?.[names?.indexOf(name) ?? -1] ?? NaN)
  return { overflows: value('ListenOverflows'), drops: value('ListenDrops') }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN)
}

/** The time of each of `n` requests sent one after another, each on a new connection, in ms. */
async function sequential(port: number, key: string, requestPath: string, n: number): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const started = performance.now()
    const status = await new Promise<number>((resolve, reject) => {
      const request = http.get({ host: '127.0.0.1', port, path: requestPath, agent: false, headers: { authorization: `Bearer ${key}` }, timeout: ANSWER_WITHIN_MS }, (response) => {
        response.resume().on('end', () => resolve(response.statusCode ?? 0))
      })
      request.on('timeout', () => request.destroy(new Error(`${requestPath} was not answered within ${ANSWER_WITHIN_MS} ms`)))
      request.on('error', reject)
    })
    if (status !== 200) throw new Error(`${requestPath} answered ${status}`)
    times.push(performance.now() - started)
  }
  return times
}

async function main(): Promise<number> {
  let values
  try {
    ;({ values } = parseArgs({
      options: {
        connections: { type: 'string', default: '4000' },
        seconds: { type: 'string', default: '8' },
        workers: { type: 'string' },
        path: { type: 'string', default: '/v1/pets?limit=20' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }))
  } catch (error) {
    console.error(`burst: ${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (values.help) {
    console.log(USAGE)
    return 0
  }
  const count = Number(values.connections)
  const seconds = Number(values.seconds)
  if (!Number.isInteger(count) || count < 1 || !(seconds > 0)) {
    console.error(`burst: --connections takes a positive integer and --seconds a positive number\n\n${USAGE}`)
    return 2
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-burst-'))
  let server: PetstoreProcess | undefined
  const { stop } = guardRun({
    name: 'burst',
    hardCleanup: () => {
      server?.child.kill('SIGKILL')
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: (seconds + 120) * 1000,
    timeLimitExitCode: 3,
    timeLimitMessage: 'the time bound was reached',
  })
  try {
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}`,
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_KEY: '0',
    }
    const key = await createKey(env, 'burst')
    server = await startPetstore({
      cwd: dir,
      env,
      args: values.workers === undefined ? [] : ['--workers', values.workers],
      logPath: path.join(dir, 'serve.log'),
    })
    // A process just started on a busy machine may shed its first writes (503 overloaded): wait and try again.
    for (let attempt = 1; ; attempt++) {
      try {
        await createPets(server.baseUrl, key, { count: SEED_PETS, concurrency: 10, body: (n) => JSON.stringify({ name: `burst-${n}`, categoryId: 1 + (n % 5) }), signal: stop.signal })
        break
      } catch (error) {
        if (attempt === 5 || !String(error).includes('answered 503')) throw error
        await new Promise((resolve) => setTimeout(resolve, 1_000))
      }
    }
    const request = `GET ${values.path} HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\nauthorization: Bearer ${key}\r\n\r\n`
    const atRestTimes = await sequential(server.port, key, values.path, REST_REQUESTS)
    const atRest = [...atRestTimes].sort((a, b) => a - b)

    const kernelBefore = listenDrops()
    const startedAt = performance.now()
    const connections = await burst(server.port, request, count, startedAt + seconds * 1000, ANSWER_WITHIN_MS, stop.signal)
    const kernelAfter = listenDrops()
    stop.signal.throwIfAborted()
    const after = await sequential(server.port, key, values.path, REST_REQUESTS)

    const answered = connections.filter((c) => c.firstAnswerAt !== undefined && c.firstAnswerAt - c.openedAt <= ANSWER_WITHIN_MS)
    const waits = answered.map((c) => (c.firstAnswerAt ?? 0) - c.openedAt).sort((a, b) => a - b)
    const connects = connections.flatMap((c) => (c.connectedAt === undefined ? [] : [c.connectedAt - c.openedAt])).sort((a, b) => a - b)
    const byStatus: Record<string, number> = {}
    for (const c of answered) byStatus[String(c.firstStatus)] = (byStatus[String(c.firstStatus)] ?? 0) + 1
    const errors: Record<string, number> = {}
    for (const c of connections) {
      if (answered.includes(c)) continue
      const why = c.firstAnswerAt !== undefined ? 'answered later' : (c.error ?? 'no answer')
      errors[why] = (errors[why] ?? 0) + 1
    }
    const result = {
      connections: count,
      seconds,
      workers: values.workers === undefined ? 0 : Number(values.workers),
      listenBacklog: env.LISTEN_BACKLOG ?? 'default',
      answeredWithin10s: answered.length,
      firstStatus: byStatus,
      unanswered: errors,
      answers: connections.reduce((sum, c) => sum + c.answers, 0),
      connectMs: { p50: round(percentile(connects, 50)), p99: round(percentile(connects, 99)), max: round(connects.at(-1) ?? NaN) },
      firstAnswerMs: { p50: round(percentile(waits, 50)), p99: round(percentile(waits, 99)), max: round(waits.at(-1) ?? NaN) },
      kernel: { listenOverflows: kernelAfter.overflows - kernelBefore.overflows, listenDrops: kernelAfter.drops - kernelBefore.drops },
      atRestMs: { first: round(atRestTimes[0] ?? NaN, 2), p50: round(percentile(atRest, 50), 2), max: round(atRest.at(-1) ?? NaN, 2) },
      afterMs: { first: round(after[0] ?? NaN, 2), p50: round(percentile([...after].sort((a, b) => a - b), 50), 2) },
    }
    if (values.json) console.log(JSON.stringify(result))
    else {
      console.log(`${count} connections at once, each sending ${values.path} for ${seconds} s${result.workers > 0 ? `, --workers ${result.workers}` : ''}`)
      console.log(`  answered within ${ANSWER_WITHIN_MS / 1000} s: ${answered.length} of ${count}, first answers by status ${JSON.stringify(byStatus)}`)
      if (answered.length < count) console.log(`  unanswered: ${JSON.stringify(errors)}`)
      console.log(`  ${result.answers} answers in all; connect ms p50 ${result.connectMs.p50} p99 ${result.connectMs.p99} max ${result.connectMs.max}`)
      console.log(`  first answer ms p50 ${result.firstAnswerMs.p50} p99 ${result.firstAnswerMs.p99} max ${result.firstAnswerMs.max}`)
      console.log(`  kernel: ListenOverflows +${result.kernel.listenOverflows}, ListenDrops +${result.kernel.listenDrops} (the whole machine's)`)
      console.log(`  requests on a new connection, at rest: first ${result.atRestMs.first} ms, p50 ${result.atRestMs.p50} ms; after the burst: first ${result.afterMs.first} ms, p50 ${result.afterMs.p50} ms`)
    }
    return answered.length === count ? 0 : 1
  } finally {
    if (server !== undefined) {
      const exit = await stopProcess(server, { killAfterMs: 20_000 })
      if (exit.code !== 0) console.error(`burst: the server ended ${describeExit(exit)}`)
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`burst: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(3)
  },
)
