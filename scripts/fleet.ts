// A fleet on one database (issue 29): PostgreSQL with max_connections = 30, one PgBouncer in transaction
// mode allowed SERVER_LIMIT server connections, and 12 service processes (instances × `serve --workers`)
// behind it, each with a pool of its own, so that the fleet's client connections far outnumber the
// server's. A mixed load (listPets, getPet, createPet, createPet with an Idempotency-Key) runs through the
// fleet, then the same load through one process straight to PostgreSQL, on the same machine in the same
// run, for the ratio. What must hold: every answer is one its operation documents (a 5xx only as 503 with
// Retry-After), errors in the one error shape; every acknowledged pet reads back the same; a keyed create
// retried makes one pet; PostgreSQL never holds more client connections than the pooler's limit.
// Exit 0 when all of it held, 1 otherwise.
//
// Needs Debian's PostgreSQL and PgBouncer (scripts/pg-cluster.ts), and runs bin/petstore.js of this
// checkout (`npm run build` first). test/storage/fleet.test.ts runs a short fleet with what this exports.
//
//   npm run fleet -- [--seconds 15] [--instances 6] [--workers 2] [--connections 48]
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs, promisify } from 'node:util'
import { type PostgresNode, type Pooler, clientConnections, clusterUnavailable, startPgBouncer, startPrimary } from './pg-cluster.js'
import {
  BIN,
  Interrupted,
  type PetstoreProcess,
  createKey,
  errorShape,
  guardRun,
  type ProcessGroup,
  processGroup,
  round,
  startPetstore,
  stopProcess,
} from './petstore-process.js'

/** PostgreSQL's `max_connections`, as the issue sets it. */
const MAX_CONNECTIONS = 30
/** Server connections PgBouncer may open to PostgreSQL (`default_pool_size` and `max_db_connections`). */
export const SERVER_LIMIT = 20
/** DATABASE_POOL_SIZE of each fleet process: 12 × 5 client connections share the pooler's 20. */
const FLEET_POOL_SIZE = 5

export const KINDS = ['list', 'get', 'create', 'keyed create'] as const
export type Kind = (typeof KINDS)[number]

/** The statuses each kind of request may get from a fleet at its limits: 503 is the documented "try later". */
export const DOCUMENTED: Record<Kind, readonly number[]> = {
  list: [200, 503],
  get: [200, 503],
  create: [201, 503],
  'keyed create': [201, 409, 503],
}

/** PostgreSQL and the pooler in front of it. */
export interface FleetDatabase {
  primary: PostgresNode
  pooler: Pooler
  destroy(): Promise<void>
}

/**
 * A PostgreSQL of MAX_CONNECTIONS holding `databases`, empty, and a PgBouncer in front of it in transaction mode,
 * limited to SERVER_LIMIT server connections.
 */
export async function startFleetDatabase(databases: string[]): Promise<FleetDatabase> {
  const unavailable = clusterUnavailable()
  if (unavailable !== undefined) throw new Error(unavailable)
  const primary = await startPrimary({ maxConnections: MAX_CONNECTIONS })
  try {
    for (const name of databases) await primary.query(`CREATE DATABASE ${name}`)
    const pooler = await startPgBouncer(primary, { poolMode: 'transaction', poolSize: SERVER_LIMIT, maxDbConnections: SERVER_LIMIT })
    return {
      primary,
      pooler,
      async destroy() {
        await pooler.destroy()
        await primary.destroy()
      },
    }
  } catch (error) {
    await primary.destroy()
    throw error
  }
}

/**
 * The environment of a fleet process behind the pooler, beyond what any process gets: unnamed statements, as
 * PgBouncer 1.18 in transaction mode needs, and no per-key rate limit (one key carries the whole load).
 */
export function fleetEnv(databaseUrl: string): Record<string, string> {
  return { DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: String(FLEET_POOL_SIZE), DATABASE_PREPARED_STATEMENTS: 'false', RATE_LIMIT_PER_KEY: '0' }
}

/** `petstore migrate` on the database of `env`, as an operator runs it before a fleet starts. */
export async function migrate(env: Record<string, string>): Promise<void> {
  await promisify(execFile)(process.execPath, [BIN, 'migrate'], { env, timeout: 60_000 })
}

/** Starts `petstore serve` with these arguments after `serve`, until healthy; the caller's, so that it tracks what it started. */
export type StartService = (args: string[]) => Promise<PetstoreProcess>

/**
 * `instances` × `serve --workers N`, two instances starting at a time: a Node process starting takes a core for
 * a while, and a dozen starting at once on a small machine each took longer than a start may take.
 */
export async function startFleet(start: StartService, { instances, workers }: { instances: number; workers: number }): Promise<PetstoreProcess[]> {
  const started: PetstoreProcess[] = []
  const args = workers === 1 ? [] : ['--workers', String(workers)]
  let next = 0
  const starter = async () => {
    while (next++ < instances) started.push(await start(args))
  }
  await Promise.all([starter(), starter()])
  return started
}

/** The pids of the processes that serve requests: an instance's workers, or the instance itself without --workers. */
export function servingProcesses(instances: PetstoreProcess[], workers: number): number[] {
  if (workers === 1) return instances.map((instance) => instance.pid)
  const parents = new Set(instances.map((instance) => instance.pid))
  return fs.readdirSync('/proc').flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      // The command name, in parentheses, may hold spaces: the state and the parent's pid follow its end.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      return parents.has(ppid) ? [Number(name)] : []
    } catch {
      // Exited while we looked.
      return []
    }
  }).sort((a, b) => a - b)
}

/** CPU seconds the processes have used so far, user and system (Linux's clock ticks are 1/100 s). */
function cpuSeconds(pids: number[]): number {
  let ticks = 0
  for (const pid of pids) {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // Exited: its time is lost to the total, and the report says how many processes there were.
    }
  }
  return ticks / 100
}

interface ConnectionPeaks {
  /** PostgreSQL's client connections, the sampler's own excepted. */
  maxServer: number
  /** Clients connected to the pooler, when there is one. */
  maxPoolerClients: number
  samples: number
  /** Samples that could not be taken, each with why. */
  failures: string[]
}

/** Samples PostgreSQL's client connections (and the pooler's clients) every `everyMs` until `stop()`. */
function sampleConnections(primary: PostgresNode, pooler: Pooler | undefined, everyMs = 100): { stop(): Promise<ConnectionPeaks> } {
  const peaks: ConnectionPeaks = { maxServer: 0, maxPoolerClients: 0, samples: 0, failures: [] }
  let running = true
  const sampling = (async () => {
    while (running) {
      const started = Date.now()
      try {
        const [server, pools] = await Promise.all([clientConnections(primary), pooler?.admin('SHOW POOLS') ?? []])
        // The admin console's own pool holds this sampler.
        const served = pools.filter((pool) => pool.database !== 'pgbouncer')
        const poolerClients = served.reduce((sum, pool) => sum + Number(pool.cl_active) + Number(pool.cl_waiting), 0)
        peaks.maxServer = Math.max(peaks.maxServer, server)
        peaks.maxPoolerClients = Math.max(peaks.maxPoolerClients, poolerClients)
        peaks.samples++
      } catch (error) {
        peaks.failures.push((error as Error).message)
      }
      await sleep(Math.max(0, everyMs - (Date.now() - started)))
    }
  })()
  return {
    async stop() {
      running = false
      await sampling
      return peaks
    },
  }
}

/** A create sent with an Idempotency-Key, and what it first got. */
interface Keyed {
  key: string
  name: string
  body: string
  status?: number
  /** The 201 body, when one came. */
  answer?: string
}

interface LoadResult {
  /** `${kind} ${status}` → how many; `${kind} connection error` for a request that got no answer. */
  answers: Map<string, number>
  /** Every answer that broke the contract, as it came. */
  problems: string[]
  /** id → body of every pet acknowledged with 201. */
  acknowledged: Map<string, string>
  keyed: Keyed[]
  /** Answers, and 2xx answers, completed after the warm-up, with their latencies in ms and the window's length. */
  measured: { answers: number; ok: number; latencies: number[]; seconds: number }
  /** CPU seconds this process (the load generator) used in the measured window. */
  loadCpuSeconds: number
}


interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
}

function send(agent: http.Agent, url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sent = http.request(url, { method, headers, agent, timeout: 30_000 }, (response) => {
      let text = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }))
      response.on('error', reject)
    })
    sent.on('timeout', () => sent.destroy(new Error('no answer within 30 s')))
    sent.on('error', reject)
    sent.end(body)
  })
}

/**
 * `connections` loops of kept-alive requests, loop i on base URL i mod n (as a load balancer spreads
 * connections), each sending list, get, create and keyed create in turn for `warmupMs + durationMs`.
 * Every answer is checked; only those after the warm-up count towards the throughput.
 */
async function driveLoad(options: {
  baseUrls: string[]
  apiKey: string
  /** The pet getPet asks for. */
  knownId: string
  connections: number
  warmupMs: number
  durationMs: number
  signal?: AbortSignal
}): Promise<LoadResult> {
  const agents = options.baseUrls.map(() => new http.Agent({ keepAlive: true, maxSockets: options.connections }))
  const result: LoadResult = {
    answers: new Map(),
    problems: [],
    acknowledged: new Map(),
    keyed: [],
    measured: { answers: 0, ok: 0, latencies: [], seconds: options.durationMs / 1000 },
    loadCpuSeconds: 0,
  }
  const count = (what: string) => result.answers.set(what, (result.answers.get(what) ?? 0) + 1)
  const measureFrom = Date.now() + options.warmupMs
  const until = measureFrom + options.durationMs
  let cpuAtStart: NodeJS.CpuUsage | undefined
  const warmedUp = setTimeout(() => (cpuAtStart = process.cpuUsage()), options.warmupMs)
  const loop = async (i: number) => {
    const agent = agents[i % agents.length] as http.Agent
    const baseUrl = options.baseUrls[i % options.baseUrls.length] as string
    for (let n = 0; Date.now() < until && options.signal?.aborted !== true; n++) {
      const kind = KINDS[(i + n) % KINDS.length] as Kind
      const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}` }
      let method = 'GET'
      let url = kind === 'get' ? `/v1/pets/${options.knownId}` : '/v1/pets?limit=20'
      let body: string | undefined
      let keyed: Keyed | undefined
      if (kind === 'create' || kind === 'keyed create') {
        method = 'POST'
        url = '/v1/pets'
        headers['content-type'] = 'application/json'
        const name = `fleet ${kind} ${i}-${n}`
        body = JSON.stringify({ name, categoryId: 1 + (n % 50) })
        if (kind === 'keyed create') {
          keyed = { key: randomUUID(), name, body }
          result.keyed.push(keyed)
          headers['idempotency-key'] = keyed.key
        }
      }
      const started = performance.now()
      let answer: Answer
      try {
        answer = await send(agent, `${baseUrl}${url}`, method, headers, body)
      } catch (error) {
        count(`${kind} connection error`)
        result.problems.push(`${kind}: no answer: ${(error as Error).message}`)
        await sleep(50)
        continue
      }
      const { status, text } = answer
      count(`${kind} ${status}`)
      if (Date.now() > measureFrom && Date.now() <= until) {
        result.measured.answers++
        if (status < 300) {
          result.measured.ok++
          result.measured.latencies.push(performance.now() - started)
        }
      }
      if (!DOCUMENTED[kind].includes(status)) result.problems.push(`${kind}: undocumented ${status} ${text.slice(0, 200)}`)
      if (status >= 400) {
        const wrong = errorShape(status, text)
        if (wrong !== undefined) result.problems.push(`${kind} ${status}: ${wrong}`)
      }
      if (status >= 500 && answer.headers['retry-after'] === undefined) result.problems.push(`${kind} ${status} without Retry-After`)
      if (keyed !== undefined) keyed.status = status
      if (status === 201) {
        result.acknowledged.set(String((JSON.parse(text) as { id: number | string }).id), text)
        if (keyed !== undefined) keyed.answer = text
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: options.connections }, (_, i) => loop(i)))
  } finally {
    clearTimeout(warmedUp)
    for (const agent of agents) agent.destroy()
  }
  const cpu = process.cpuUsage(cpuAtStart)
  result.loadCpuSeconds = cpuAtStart === undefined ? 0 : (cpu.user + cpu.system) / 1e6
  return result
}

/** POST /v1/pets with a JSON body; the answer's status and text. */
async function post(baseUrl: string, apiKey: string, body: string, idempotencyKey?: string): Promise<{ status: number; replayed: boolean; text: string }> {
  const response = await fetch(`${baseUrl}/v1/pets`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    },
    body,
    signal: AbortSignal.timeout(30_000),
  })
  return { status: response.status, replayed: response.headers.get('idempotent-replayed') === 'true', text: await response.text() }
}

/** Every pet, id → body, read page by page through `baseUrl` as a client follows the `Link` header. */
async function allPets(baseUrl: string, apiKey: string): Promise<Map<string, string>> {
  const pets = new Map<string, string>()
  let next: string | undefined = '/v1/pets?limit=100'
  while (next !== undefined) {
    const response: Response = await fetch(`${baseUrl}${next}`, { headers: { authorization: `Bearer ${apiKey}` }, signal: AbortSignal.timeout(30_000) })
    if (response.status !== 200) throw new Error(`listing every pet: ${response.status} ${await response.text()}`)
    for (const pet of (await response.json()) as { id: number }[]) pets.set(String(pet.id), JSON.stringify(pet))
    const link = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
    // The link names the public origin; the path and query are what matter here.
    next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search
  }
  return pets
}

/**
 * Sends each keyed create again, with its key and body, until it is answered 201 (`withinMs` at most):
 * one first answered 201 must be replayed, byte for byte. Returns what broke that.
 */
async function retryKeyed(
  baseUrls: string[],
  apiKey: string,
  keyed: Keyed[],
  { concurrency = 16, withinMs = 10_000 }: { concurrency?: number; withinMs?: number } = {},
): Promise<string[]> {
  const problems: string[] = []
  let next = 0
  const retrier = async (i: number) => {
    const baseUrl = baseUrls[i % baseUrls.length] as string
    while (next < keyed.length) {
      const sent = keyed[next++] as Keyed
      const deadline = Date.now() + withinMs
      let last: string
      for (;;) {
        const answer = await post(baseUrl, apiKey, sent.body, sent.key).catch((error: unknown) => ({ status: 0, replayed: false, text: String(error) }))
        if (answer.status === 201) {
          if (sent.answer !== undefined && (!answer.replayed || answer.text !== sent.answer)) {
            problems.push(`Idempotency-Key ${sent.key}: first ${sent.answer}, then ${answer.replayed ? 'replayed' : 'created'} ${answer.text}`)
          }
          break
        }
        last = `${answer.status} ${answer.text.slice(0, 200)}`
        if (Date.now() > deadline) {
          problems.push(`Idempotency-Key ${sent.key} (first ${sent.status}): no pet within ${withinMs} ms of retrying: ${last}`)
          break
        }
        await sleep(100)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, i) => retrier(i)))
  return problems
}

/** The acknowledged pets that `pets` lacks or holds otherwise. */
function unreadable(acknowledged: Map<string, string>, pets: Map<string, string>): string[] {
  return [...acknowledged].filter(([id, body]) => pets.get(id) !== body).map(([id, body]) => `${body} reads as ${pets.get(id) ?? 'nothing'}`)
}

/** Keyed creates that made other than one pet (each has a name of its own). */
function notOnePet(keyed: Keyed[], pets: Map<string, string>): string[] {
  const byName = new Map<string, number>()
  for (const body of pets.values()) {
    const { name } = JSON.parse(body) as { name: string }
    byName.set(name, (byName.get(name) ?? 0) + 1)
  }
  return keyed.filter(({ name }) => byName.get(name) !== 1).map(({ key, name }) => `Idempotency-Key ${key} made ${byName.get(name) ?? 0} pets named ${name}`)
}

export interface PhaseResult {
  load: LoadResult
  connections: ConnectionPeaks
  /** Keyed retries that broke their promise. */
  retries: string[]
  /** Acknowledged pets not read back as acknowledged. */
  lost: string[]
  /** Keyed creates that made other than one pet. */
  duplicates: string[]
  pets: number
}

/**
 * One measured phase on running processes: a seed pet for getPet, the load with connections sampled
 * throughout, then every keyed create retried and every pet read back.
 */
export async function runPhase(options: {
  baseUrls: string[]
  apiKey: string
  primary: PostgresNode
  pooler?: Pooler
  connections: number
  warmupMs: number
  durationMs: number
  signal?: AbortSignal
}): Promise<PhaseResult> {
  const [first = ''] = options.baseUrls
  const seed = await post(first, options.apiKey, '{"name":"Seed","categoryId":1}')
  if (seed.status !== 201) throw new Error(`seeding: POST /v1/pets answered ${seed.status}: ${seed.text}`)
  const knownId = String((JSON.parse(seed.text) as { id: number }).id)
  // Sampled past the load too: the keyed retries and the read-back go through the same pools.
  const sampler = sampleConnections(options.primary, options.pooler)
  let load: LoadResult, retries: string[], pets: Map<string, string>, connections: ConnectionPeaks
  try {
    load = await driveLoad({ ...options, knownId })
    retries = await retryKeyed(options.baseUrls, options.apiKey, load.keyed)
    pets = await allPets(first, options.apiKey)
  } finally {
    connections = await sampler.stop()
  }
  load.acknowledged.set(knownId, seed.text)
  return { load, connections, retries, lost: unreadable(load.acknowledged, pets), duplicates: notOnePet(load.keyed, pets), pets: pets.size }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN
}

/** Answers per second, 2xx per second, and the 2xx latencies of the measured window. */
function throughput(load: LoadResult): { answersPerSecond: number; okPerSecond: number; p50: number; p99: number } {
  const sorted = load.measured.latencies.toSorted((a, b) => a - b)
  return {
    answersPerSecond: load.measured.answers / load.measured.seconds,
    okPerSecond: load.measured.ok / load.measured.seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  }
}

/** Every way the phase broke the contract; empty when it held. */
function phaseProblems(phase: PhaseResult, serverLimit: number): string[] {
  const problems = [...phase.load.problems, ...phase.retries, ...phase.lost, ...phase.duplicates]
  if (phase.connections.maxServer > serverLimit) problems.push(`PostgreSQL held ${phase.connections.maxServer} client connections, over ${serverLimit}`)
  if (phase.connections.failures.length > 0) problems.push(`connections could not be sampled: ${phase.connections.failures.slice(0, 3).join('; ')}`)
  if (phase.load.measured.ok === 0) problems.push('no request succeeded')
  return problems
}

function describePhase(name: string, phase: PhaseResult, processes: number, cpu: number): string {
  const rate = throughput(phase.load)
  const statuses = [...phase.load.answers].sort(([a], [b]) => a.localeCompare(b)).map(([what, n]) => `${what}: ${n}`)
  return [
    `${name}: ${Math.round(rate.okPerSecond)} 2xx/s (${Math.round(rate.answersPerSecond)} answers/s), p50 ${round(rate.p50, 1)} ms, p99 ${round(rate.p99, 1)} ms`,
    `  PostgreSQL client connections at most ${phase.connections.maxServer} (${phase.connections.samples} samples)` +
      (phase.connections.maxPoolerClients > 0 ? `; pooler clients at most ${phase.connections.maxPoolerClients}` : ''),
    `  CPU in the window: ${round(cpu, 1)} s by ${processes} service process${processes === 1 ? '' : 'es'}, ${round(phase.load.loadCpuSeconds, 1)} s by the load generator`,
    `  ${phase.load.keyed.length} keyed creates retried, ${phase.pets} pets read back`,
    `  statuses: ${statuses.join(', ')}`,
  ].join('\n')
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '15' },
      instances: { type: 'string', default: '6' },
      workers: { type: 'string', default: '2' },
      connections: { type: 'string', default: '48' },
    },
  })
  const seconds = Number(values.seconds)
  const instances = Number(values.instances)
  const workers = Number(values.workers)
  const connections = Number(values.connections)
  const warmupMs = 2_000
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-fleet-'))
  const running = new Map<PetstoreProcess, ProcessGroup>()
  let database: FleetDatabase | undefined
  const { stop } = guardRun({
    name: 'fleet',
    // Each instance leads a process group of its own (`detached`), its workers included; the database
    // and the pooler are stopped by scripts/pg-cluster.ts at exit.
    hardCleanup: () => {
      for (const group of running.values()) group.kill('SIGKILL')
      fs.rmSync(dir, { recursive: true, force: true })
    },
    hardLimitMs: (2 * (seconds + warmupMs / 1000) + 240) * 1000,
    timeLimitExitCode: 1,
    timeLimitMessage: 'over its time bound; killing everything it started.',
  })
  const start = (env: Record<string, string>, name: string) => async (args: string[]) => {
    const server = await startPetstore({
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        LOG_LEVEL: 'warn',
        METRICS_PORT: 'off',
        SHUTDOWN_TIMEOUT_MS: '5000',
        // The load generator shares the cores: an event loop it delays must not turn answers into 503 overloaded.
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
        ...env,
      },
      args,
      logPath: path.join(dir, `${name}.log`),
      detached: true,
      timeoutMs: 60_000,
    })
    running.set(server, processGroup(server.pid))
    return server
  }
  const stopAll = async () => {
    await Promise.all(
      [...running.keys()].map(async (server) => {
        await stopProcess(server, { killAfterMs: 15_000 })
        running.delete(server)
      }),
    )
  }

  try {
    console.log(
      `fleet: ${instances} instance${instances === 1 ? '' : 's'} × --workers ${workers}, DATABASE_POOL_SIZE=${FLEET_POOL_SIZE} each, through PgBouncer ` +
        `(transaction mode, ${SERVER_LIMIT} server connections) to PostgreSQL (max_connections ${MAX_CONNECTIONS}); then one process straight ` +
        `to PostgreSQL. ${connections} keep-alive connections, ${warmupMs / 1000} s warm-up + ${seconds} s each; ${os.availableParallelism()} cores.`,
    )
    database = await startFleetDatabase(['fleet', 'single'])
    const { primary, pooler } = database
    const run = { connections, warmupMs, durationMs: seconds * 1000, signal: stop.signal, primary }

    const fleetDatabase = { PATH: process.env.PATH ?? '', ...fleetEnv(pooler.url('fleet')) }
    await migrate(fleetDatabase)
    const fleetKey = await createKey(fleetDatabase, 'fleet')
    const fleet = await startFleet(start(fleetDatabase, 'fleet'), { instances, workers })
    const serving = servingProcesses(fleet, workers)
    let cpu = cpuSeconds(serving)
    const fleetPhase = await runPhase({ ...run, baseUrls: fleet.map((server) => server.baseUrl), apiKey: fleetKey, pooler })
    cpu = cpuSeconds(serving) - cpu
    const stillServing = servingProcesses(fleet, workers)
    stop.signal.throwIfAborted()
    await stopAll()
    // Its idle server connections would count against the single process's.
    await pooler.destroy()

    const singleDatabase = { PATH: process.env.PATH ?? '', DATABASE_URL: primary.url('single'), RATE_LIMIT_PER_KEY: '0' }
    await migrate(singleDatabase)
    const singleKey = await createKey(singleDatabase, 'single')
    const single = await start(singleDatabase, 'single')([])
    let singleCpu = cpuSeconds([single.pid])
    const singlePhase = await runPhase({ ...run, baseUrls: [single.baseUrl], apiKey: singleKey })
    singleCpu = cpuSeconds([single.pid]) - singleCpu
    stop.signal.throwIfAborted()
    await stopAll()

    console.log(describePhase(`fleet (${serving.length} serving processes)`, fleetPhase, serving.length, cpu))
    console.log(describePhase('single process, straight to PostgreSQL (prepared statements, DATABASE_POOL_SIZE default)', singlePhase, 1, singleCpu))
    const ratio = throughput(fleetPhase.load).okPerSecond / throughput(singlePhase.load).okPerSecond
    console.log(`ratio fleet ÷ single (2xx/s): ${round(ratio, 2)}; load average ${os.loadavg().map((load) => round(load, 1)).join(' ')}`)

    const problems = phaseProblems(fleetPhase, SERVER_LIMIT).map((problem) => `fleet: ${problem}`)
    problems.push(...phaseProblems(singlePhase, Number.POSITIVE_INFINITY).map((problem) => `single: ${problem}`))
    if (serving.length < 12) problems.push(`fleet: ${serving.length} serving processes, fewer than 12`)
    if (stillServing.join() !== serving.join()) problems.push(`fleet: serving processes changed under load: ${serving.join()} → ${stillServing.join()}`)
    for (const problem of problems.slice(0, 20)) console.log(`  ${problem}`)
    console.log(problems.length === 0 ? 'PASS' : `FAIL: ${problems.length} problems`)
    return problems.length === 0 ? 0 : 1
  } catch (error) {
    if (error instanceof Interrupted || stop.signal.aborted) {
      console.error(`fleet: ${(stop.signal.reason as Error).message}`)
    } else {
      console.error(error)
      for (const server of running.keys()) console.error(`${server.name} (pid ${server.pid}):\n${server.output()}`)
    }
    return 1
  } finally {
    await stopAll().catch(() => {})
    await database?.destroy().catch(() => {})
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// Run as a script (`npm run fleet`); imported by test/storage/fleet.test.ts, it only exports.
if (path.resolve(process.argv[1] ?? '') === import.meta.filename) process.exit(await main())
