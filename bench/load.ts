// The autocannon load generator of the benchmark, one process per measured run so its CPU is its own and
// no state carries over between rounds: `node --import tsx bench/load.ts '<LoadOptions as JSON>'`.
// Drives one server over 127.0.0.1 and prints one line of JSON (LoadResult). When wrk is installed,
// which costs the shared CPU less, the orchestrator runs it instead (wrk.ts), with the same requests.
import autocannon from 'autocannon'
import fs from 'node:fs'
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
}

/** What drives the servers: wrk when it is installed (wrk.ts, spawned by rounds.ts), else autocannon here. */
export type LoadTool = 'autocannon' | 'wrk'

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

try {
  const options = JSON.parse(process.argv[2] ?? '') as LoadOptions
  process.stdout.write(JSON.stringify(await run(options)) + '\n')
} catch (error) {
  process.stderr.write(`load: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exitCode = 1
}
