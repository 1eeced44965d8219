// listPets on PostgreSQL under concurrent creates, with one and with two `petstore serve` instances on
// one database: what a page read costs when every instance's reads and creates meet in the database's
// locks (docs/decisions/0015-postgres-read-path.md). Starts an embedded PostgreSQL server on 127.0.0.1,
// stops by itself and deletes everything it made. It builds nothing: the instances run `bin/petstore.js`
// of this checkout (`npm run build` first), or of each `--build` folder in turn, round after round, so
// that two builds are compared on the same machine at the same time (a folder holds bin/ and dist/ of
// a build and a node_modules link).
//
// Before the instances, the same load straight on the database, one pg connection per loop, for each
// design in SQL_DESIGNS: what the locks cost without HTTP and Node in the way (`--sql-only`: that alone).
// There half the reads are of the newest pets, the page that creates in flight leave holes in.
//
//   npm run pg-list-under-writes -- [--seconds 6] [--readers 16] [--writers 8] [--rounds 1] [--build DIR]… [--sql-only]
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { parseArgs, promisify } from 'node:util'
import pg from 'pg'
import { type EmbeddedServer, createPostgresDatabase, startEmbeddedPostgres } from './embedded-postgres.js'
import {
  BIN,
  type PetstoreProcess,
  createPets,
  describeExit,
  freePort,
  guardRun,
  round,
  spawnNode,
  stopProcess,
  waitUntilReady,
} from './petstore-process.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '6' },
    readers: { type: 'string', default: '16' },
    writers: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '1' },
    build: { type: 'string', multiple: true, default: [] },
    'sql-only': { type: 'boolean', default: false },
  },
})
const SECONDS = Number(values.seconds)
const READERS = Number(values.readers)
const WRITERS = Number(values.writers)
const ROUNDS = Number(values.rounds)
const BINS = values.build.length === 0 ? [BIN] : values.build.map((folder) => path.resolve(folder, 'bin', 'petstore.js'))
const SEED_PETS = 2_000
const SCENARIOS = [
  { instances: 1, writers: 0 },
  { instances: 1, writers: WRITERS },
  { instances: 2, writers: 0 },
  { instances: 2, writers: WRITERS },
]

/**
 * Page reads and creates as each design sends them. `before` is the design up to ADR 15: an advisory
 * lock, shared by creates and exclusive for a read, then the page in a second statement.
 */
const SQL_DESIGNS: Record<string, { list: string[]; insert: string }> = {
  'advisory lock, 2 statements': {
    list: [
      "SELECT pg_advisory_xact_lock(1885697139), pg_sequence_last_value(pg_get_serial_sequence('pets', 'id')::regclass)::text AS id",
      'SELECT id, name, category_id, status FROM pets WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3',
    ],
    insert:
      'WITH settle AS (SELECT pg_advisory_xact_lock_shared(1885697139)) ' +
      'INSERT INTO pets (name, category_id, status, created_at) SELECT $1, $2, $3, $4 FROM settle RETURNING id',
  },
  'pets_page(): holes, else table lock': {
    list: ['SELECT id, name, category_id, status FROM pets_page($1, $2, $3)'],
    insert:
      'WITH settle AS (INSERT INTO pet_ids_settled SELECT WHERE false) ' +
      'INSERT INTO pets (name, category_id, status, created_at) VALUES ($1, $2, $3, $4) RETURNING id',
  },
}

/** Latencies in ms of the requests that finished inside the measured window. */
interface Samples {
  latencies: number[]
  errors: number
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? Number.NaN : (sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN)
}

/** `connections` loops, connection i on instance i mod n (as a load balancer would), each sending `send` until `until`. */
async function loop(
  agents: http.Agent[],
  urls: string[],
  connections: number,
  until: number,
  send: (agent: http.Agent, baseUrl: string) => Promise<number>,
): Promise<Samples> {
  const samples: Samples = { latencies: [], errors: 0 }
  const worker = async (i: number) => {
    const agent = agents[i % agents.length] as http.Agent
    const baseUrl = urls[i % urls.length] as string
    while (Date.now() < until) {
      const started = performance.now()
      const status = await send(agent, baseUrl).catch(() => 0)
      if (status === 200 || status === 201) samples.latencies.push(performance.now() - started)
      else samples.errors++
    }
  }
  await Promise.all(Array.from({ length: connections }, (_, i) => worker(i)))
  return samples
}

function request(agent: http.Agent, url: string, key: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const sent = http.request(
      url,
      {
        agent,
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        timeout: 20_000,
      },
      (response) => {
        response.resume()
        response.once('end', () => resolve(response.statusCode ?? 0))
        response.once('error', reject)
      },
    )
    sent.once('error', reject)
    sent.once('timeout', () => sent.destroy(new Error('timeout')))
    sent.end(body)
  })
}

function summary(samples: Samples, seconds: number): string {
  const sorted = samples.latencies.toSorted((a, b) => a - b)
  const rate = String(Math.round(sorted.length / seconds)).padStart(6)
  const p50 = round(percentile(sorted, 50), 2).toFixed(2).padStart(6)
  const p99 = round(percentile(sorted, 99), 2).toFixed(2).padStart(7)
  return `${rate}/s  p50 ${p50} ms  p99 ${p99} ms${samples.errors > 0 ? `  ${samples.errors} errors` : ''}`
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-pg-list-'))
// Run as root, embedded-postgres runs the server as a `postgres` user, which must reach its data folder.
fs.chmodSync(dir, 0o755)
const running: PetstoreProcess[] = []
let database: EmbeddedServer | undefined
const { stop } = guardRun({
  name: 'pg-list-under-writes',
  hardCleanup: () => {
    for (const server of running) server.child.kill('SIGKILL')
    database?.kill()
    fs.rmSync(dir, { recursive: true, force: true })
  },
  hardLimitMs: (ROUNDS * (BINS.length + 1) * (SCENARIOS.length * (SECONDS + 2) + 60) + 60) * 1000,
  timeLimitExitCode: 1,
  timeLimitMessage: 'over its time bound; killing everything it started.',
})

/** `bin serve` on a free port of 127.0.0.1, metrics on another, until /healthz answers. */
async function start(bin: string, env: Record<string, string>, name: string): Promise<PetstoreProcess> {
  const [port, metricsPort] = [await freePort(), await freePort()]
  const started = spawnNode(name, [bin, 'serve'], {
    cwd: path.dirname(path.dirname(bin)),
    env: {
      ...env,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      // The limiter stays on, as in production, but never rejects; and a busy machine (the load
      // generator runs on it too) must not turn lock waits into 503s.
      RATE_LIMIT_PER_KEY: '1000000000',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      SHUTDOWN_TIMEOUT_MS: '5000',
    },
    logPath: path.join(dir, `${name}.log`),
  })
  const server: PetstoreProcess = Object.assign(started, { port, baseUrl: `http://127.0.0.1:${port}` })
  running.push(server)
  try {
    await waitUntilReady(server, `${server.baseUrl}/healthz`, { timeoutMs: 20_000 })
  } catch (error) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    throw new Error(`${name}: ${describeExit(server.exit)}`, { cause: error })
  }
  return server
}

/** One build on a new database: two instances, seeded, then every scenario. */
async function measure(bin: string, serverUrl: string, roundNo: number): Promise<void> {
  const database = await createPostgresDatabase(serverUrl)
  const name = new URL(database.url).pathname.slice(1)
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: database.url }
  const instances = [await start(bin, env, `${name}-1`), await start(bin, env, `${name}-2`)]
  const agents = instances.map(() => new http.Agent({ keepAlive: true, maxSockets: READERS + WRITERS }))
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'keys', 'create', '--name', 'pg-list', '--json'], { env, timeout: 30_000 })
    const key = (JSON.parse(stdout) as { key: string }).key
    const [first] = instances
    if (first === undefined) throw new Error('no instance')
    await createPets(first.baseUrl, key, { count: SEED_PETS, concurrency: 8, body: (n) => `{"name":"Seed ${n}","categoryId":1}`, signal: stop.signal })
    for (const scenario of SCENARIOS) {
      stop.signal.throwIfAborted()
      const urls = instances.slice(0, scenario.instances).map((server) => server.baseUrl)
      const used = agents.slice(0, scenario.instances)
      const list = (agent: http.Agent, baseUrl: string) => request(agent, `${baseUrl}/v1/pets?limit=20`, key)
      const create = (agent: http.Agent, baseUrl: string) =>
        request(agent, `${baseUrl}/v1/pets`, key, '{"name":"Concurrent","categoryId":2,"status":"available"}')
      // Warm-up: every connection of every pool prepares its statements.
      await loop(used, urls, READERS, Date.now() + 1_000, list)
      const until = Date.now() + SECONDS * 1000
      const [reads, writes] = await Promise.all([loop(used, urls, READERS, until, list), loop(used, urls, scenario.writers, until, create)])
      const what = `${scenario.instances} instance${scenario.instances > 1 ? 's' : ' '}, ${scenario.writers === 0 ? 'no writes' : `${scenario.writers} writers`}`.padEnd(22)
      const build = BINS.length > 1 ? `${path.basename(path.dirname(path.dirname(bin)))}  ` : ''
      console.log(`round ${roundNo}  ${build}${what}  list ${summary(reads, SECONDS)}${scenario.writers === 0 ? '' : `  |  create ${summary(writes, SECONDS)}`}`)
    }
  } catch (error) {
    for (const server of instances) console.error(`${server.name}:\n${server.output()}`)
    throw error
  } finally {
    for (const agent of agents) agent.destroy()
    await Promise.all(instances.map((server) => stopProcess(server, { killAfterMs: 8_000 })))
    running.splice(0, running.length)
    await database.drop()
  }
}

/** Every design of SQL_DESIGNS on a new database migrated by `bin`, with readers and writers as pg connections. */
async function measureSql(bin: string, serverUrl: string, roundNo: number): Promise<void> {
  const database = await createPostgresDatabase(serverUrl)
  const url = new URL(database.url)
  const clients: pg.Client[] = []
  try {
    await promisify(execFile)(process.execPath, [bin, 'migrate'], { env: { PATH: process.env.PATH ?? '', DATABASE_URL: url.href }, timeout: 30_000 })
    for (let i = 0; i < READERS + WRITERS; i++) {
      const client = new pg.Client({ connectionString: url.href })
      client.on('error', (error) => stop.abort(error))
      await client.connect()
      clients.push(client)
    }
    const seeder = clients[0] as pg.Client
    await seeder.query(`INSERT INTO pets (name, category_id, created_at) SELECT 'Seed ' || n, 1, 0 FROM generate_series(1, ${SEED_PETS}) n`)
    for (const [label, design] of Object.entries(SQL_DESIGNS)) {
      // Half the readers read the first page, half the newest pets: the page that creates in flight can
      // leave holes in.
      let newest = SEED_PETS
      let reads = 0
      const list = async (client: pg.Client) => {
        const afterId = String(reads++ % 2 === 0 ? 0 : Math.max(0, newest - 15))
        const [first, second] = design.list
        if (second === undefined) {
          await client.query({ name: `${label}-page`, text: first ?? '', values: [afterId, 21, null] })
          return
        }
        const { rows } = await client.query<{ id: string }>({ name: `${label}-settled`, text: first ?? '' })
        await client.query({ name: `${label}-page`, text: second, values: [afterId, rows[0]?.id ?? '0', 21] })
      }
      const insert = async (client: pg.Client) => {
        const { rows } = await client.query<{ id: string }>({ name: `${label}-insert`, text: design.insert, values: ['Concurrent', '2', 'available', 0] })
        newest = Math.max(newest, Number(rows[0]?.id))
      }
      for (const writers of [0, WRITERS]) {
        stop.signal.throwIfAborted()
        const run = async (group: pg.Client[], work: (client: pg.Client) => Promise<void>, until: number): Promise<Samples> => {
          const samples: Samples = { latencies: [], errors: 0 }
          await Promise.all(
            group.map(async (client) => {
              while (Date.now() < until) {
                const started = performance.now()
                try {
                  await work(client)
                  samples.latencies.push(performance.now() - started)
                } catch {
                  samples.errors++
                }
              }
            }),
          )
          return samples
        }
        const readers = clients.slice(0, READERS)
        await run(readers, list, Date.now() + 500)
        const until = Date.now() + SECONDS * 1000
        const [listed, created] = await Promise.all([run(readers, list, until), run(clients.slice(READERS, READERS + writers), insert, until)])
        const what = `${label}, ${writers === 0 ? 'no writes' : `${writers} writers`}`.padEnd(42)
        console.log(`round ${roundNo}  sql  ${what}  list ${summary(listed, SECONDS)}${writers === 0 ? '' : `  |  create ${summary(created, SECONDS)}`}`)
      }
    }
  } finally {
    await Promise.all(clients.map((client) => client.end()))
    await database.drop()
  }
}

try {
  database = await startEmbeddedPostgres()
  console.log(
    `pg-list-under-writes: ${SEED_PETS} pets; ${READERS} connections on GET /v1/pets?limit=20, ${WRITERS} on POST /v1/pets; ${SECONDS} s per scenario; ${os.cpus().length} cores`,
  )
  const serverUrl = database.url
  for (let roundNo = 1; roundNo <= ROUNDS; roundNo++) await measureSql(BINS.at(-1) ?? BIN, serverUrl, roundNo)
  if (!values['sql-only']) {
    for (let roundNo = 1; roundNo <= ROUNDS; roundNo++) {
      for (const bin of BINS) await measure(bin, serverUrl, roundNo)
    }
  }
} finally {
  await Promise.all(running.map((server) => stopProcess(server, { killAfterMs: 8_000 })))
  await database?.destroy().catch(() => {})
  fs.rmSync(dir, { recursive: true, force: true })
}
