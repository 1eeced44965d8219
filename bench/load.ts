// The load generator of the benchmark, one process per measured run so its CPU is its own and no
// state carries over between rounds: `node --import tsx bench/load.ts '<LoadOptions as JSON>'`.
// Drives one server over 127.0.0.1 with wrk (when the orchestrator found it: it costs the shared
// CPU less) or autocannon, and prints one line of JSON (LoadResult).
import autocannon from 'autocannon'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { SCENARIOS, type ScenarioId, petBody } from './scenarios.js'

export interface LoadOptions {
  baseUrl: string
  key: string
  scenario: ScenarioId
  connections: number
  durationS: number
  /** JSON array of the ids (decimal text) that getOne spreads its requests over. */
  idsFile: string
  /** Makes the names of the pets this run creates its own. */
  namePrefix: string
  tool: 'autocannon' | 'wrk'
}

export interface LoadResult {
  durationS: number
  requests: number
  requestsPerSecond: number
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number }
  non2xx: number
  /** Socket errors, timeouts included. */
  errors: number
  timeouts: number
  statusCodes: Record<string, number>
  /**
   * The server's CPU time (user and system, all its threads) per answered request, in µs, over the run:
   * read from /proc by the orchestrator (rounds.ts), not by the load generator.
   */
  serverCpuUsPerRequest?: number
}

function scenario(id: ScenarioId) {
  const found = SCENARIOS.find((candidate) => candidate.id === id)
  if (found === undefined) throw new Error(`load: unknown scenario "${id}"`)
  return found
}

/** The request of one operation; fresh headers each time, since autocannon writes Content-Length into them. */
function requestMaker(id: ScenarioId, options: LoadOptions, ids: readonly string[]): () => autocannon.Request {
  const authorization = `Bearer ${options.key}`
  const { method, path } = scenario(id)
  if (id === 'getOne') {
    // A stride coprime with the count visits every id before repeating, in an order caches cannot predict.
    const stride = ids.length % 7919 === 0 ? 1 : 7919
    let index = 0
    return () => {
      index = (index + stride) % ids.length
      return { method, path: path.replace('{id}', ids[index] ?? ''), headers: { authorization }, body: undefined }
    }
  }
  if (id === 'create') {
    let n = 0
    return () => ({
      method,
      path,
      headers: { authorization, 'content-type': 'application/json' },
      body: petBody(n++, options.namePrefix),
    })
  }
  return () => ({ method, path, headers: { authorization }, body: undefined })
}

/** autocannon's options for one fixed request (scripts/autocannon.d.ts types only what the tools use). */
interface FixedRequest {
  method?: string
  headers?: Record<string, string>
}

/** What autocannon sends: constant scenarios as plain options, so they cost no per-request callback. */
function workload(options: LoadOptions, ids: readonly string[]): Partial<autocannon.Options> & FixedRequest {
  const { scenario: id } = options
  if (id === 'list20' || id === 'list100') {
    return { method: 'GET', headers: { authorization: `Bearer ${options.key}` }, url: options.baseUrl + scenario(id).path }
  }
  const make = requestMaker(id, options, ids)
  return { requests: [{ setupRequest: (request) => ({ ...request, ...make() }) }] }
}

function run(options: LoadOptions): Promise<LoadResult> {
  const ids = JSON.parse(fs.readFileSync(options.idsFile, 'utf8')) as string[]
  if (ids.length === 0) throw new Error('load: no pet ids')
  return new Promise((resolve, reject) => {
    const settings: autocannon.Options & FixedRequest = {
      url: options.baseUrl,
      connections: options.connections,
      duration: options.durationS,
      timeout: 10,
      ...workload(options, ids),
    }
    const instance = autocannon(
      settings,
      (error, result) => {
        if (error !== null) return reject(error)
        const statusCodes: Record<string, number> = {}
        for (const [status, { count }] of Object.entries(result.statusCodeStats)) statusCodes[status] = count
        const { latency } = result
        resolve({
          durationS: result.duration,
          requests: result.requests.total,
          requestsPerSecond: Math.round((result.requests.total / result.duration) * 10) / 10,
          latencyMs: { mean: latency.mean, p50: latency.p50, p90: latency.p90, p99: latency.p99, max: latency.max },
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          statusCodes,
        })
      },
    )
    // The orchestrator's SIGTERM ends the run early, as Ctrl-C would.
    process.once('SIGTERM', () => instance.stop())
  })
}

/** A Lua string literal. */
const lua = (text: string) => JSON.stringify(text)

/** wrk's script for a scenario: the same requests as autocannon's, built in Lua. */
function wrkScript(id: ScenarioId, options: LoadOptions, ids: readonly string[]): string {
  const lines = [`wrk.headers["Authorization"] = ${lua(`Bearer ${options.key}`)}`]
  if (id === 'getOne') {
    // The same stride walk over every seeded id as the autocannon run.
    lines.push(
      `local ids = { ${ids.map(lua).join(', ')} }`,
      `local stride = (#ids % 7919 == 0) and 1 or 7919`,
      'local index = 0',
      'request = function()',
      '  index = (index + stride) % #ids',
      '  return wrk.format("GET", "/v1/pets/" .. ids[index + 1])',
      'end',
    )
  } else if (id === 'create') {
    const statuses = ['"available"', '"pending"', '"sold"']
    lines.push(
      'wrk.method = "POST"',
      'wrk.headers["Content-Type"] = "application/json"',
      `local prefix = ${lua(options.namePrefix)}`,
      `local statuses = { ${statuses.map((status) => lua(`,"status":${status}`)).join(', ')}, "" }`,
      'local n = 0',
      'request = function()',
      '  n = n + 1',
      '  local body = string.format(\'{"name":"%s-%d","categoryId":%d%s}\', prefix, n, 1 + (n * 7) % 50, statuses[n % 4 + 1])',
      '  return wrk.format(nil, nil, nil, body)',
      'end',
    )
  }
  return lines.join('\n') + '\n'
}

/** `4.10ms`, `950.00us`, `1.02s`, `2.00m` → milliseconds. */
function wrkDuration(text: string | undefined): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text ?? '')
  if (match === null) return Number.NaN
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm']
  return Math.round(Number(match[1]) * scale * 100) / 100
}

async function runWrk(options: LoadOptions): Promise<LoadResult> {
  const ids = JSON.parse(fs.readFileSync(options.idsFile, 'utf8')) as string[]
  const script = path.join(path.dirname(options.idsFile), `wrk-${process.pid}.lua`)
  fs.writeFileSync(script, wrkScript(options.scenario, options, ids))
  const { path: route } = scenario(options.scenario)
  const url = options.baseUrl + (options.scenario === 'getOne' ? '/v1/pets' : route)
  // One thread: the machine's other core is the server's.
  const args = ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--timeout', '10s', '--latency', '-s', script, url]
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  process.once('SIGTERM', () => child.kill('SIGINT'))
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  fs.rmSync(script, { force: true })
  const total = /(\d+) requests in ([\d.]+)(\w+)/.exec(output)
  if (code !== 0 || total === null) throw new Error(`wrk failed (exit ${code}):\n${output}`)
  const requests = Number(total[1])
  const durationS = wrkDuration(`${total[2]}${total[3]}`) / 1000
  const latency = /Latency\s+(\S+)\s+(\S+)\s+(\S+)/.exec(output)
  const percentile = (p: number) => wrkDuration(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(output)?.[1])
  const sockets = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output)
  const timeouts = Number(sockets?.[4] ?? 0)
  const errors = Number(sockets?.[1] ?? 0) + Number(sockets?.[2] ?? 0) + Number(sockets?.[3] ?? 0) + timeouts
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0)
  return {
    durationS,
    requests,
    requestsPerSecond: Math.round((requests / durationS) * 10) / 10,
    latencyMs: {
      mean: wrkDuration(latency?.[1]),
      p50: percentile(50),
      p90: percentile(90),
      p99: percentile(99),
      max: wrkDuration(latency?.[3]),
    },
    non2xx,
    errors,
    timeouts,
    // wrk counts answers outside 2xx/3xx without their codes.
    statusCodes: { '2xx/3xx': requests - non2xx, other: non2xx },
  }
}

try {
  const options = JSON.parse(process.argv[2] ?? '') as LoadOptions
  const result = options.tool === 'wrk' ? await runWrk(options) : await run(options)
  process.stdout.write(JSON.stringify(result) + '\n')
} catch (error) {
  process.stderr.write(`load: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exitCode = 1
}
