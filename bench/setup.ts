// The benchmark's set-up: dist/ compiled, the baselines and the floor compiled to plain JavaScript, a key,
// `petstore serve` (on SQLite or PostgreSQL) with 10,000 pets created through its API, the same pets
// read back for the in-memory baseline and the SQLite run's floor, and those started.
import Database from 'better-sqlite3'
import * as esbuild from 'esbuild'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import {
  type NodeProcess,
  type PetstoreProcess,
  ROOT,
  createKey,
  createPets,
  freePort,
  procStatusKb,
  round,
  spawnNode,
  startPetstore,
  waitUntilReady,
} from '../scripts/petstore-process.js'
import type { LoadTool } from './load.js'
import { count, megabytes, seconds } from './report.js'
import { petBody } from './scenarios.js'

export const SEED_PETS = 10_000
const SEED_CONCURRENCY = 16
const READY_TIMEOUT_MS = 20_000

function newestMtimeMs(dir: string): number {
  let newest = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}

/** Compiles src/ unless dist/ is newer than every source file: the bench measures the code as it is. */
export async function build(): Promise<void> {
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
    throw new Error(`npx tsc -p tsconfig.json failed (run with --no-build to measure dist/ as it is):\n${output.slice(0, 2_000)}`, { cause: error })
  }
  console.log(`bench: built dist/ in ${seconds(Date.now() - started)}`)
}

/** What a reference server keeps its pets in and how it serves them, each one compiled file. */
export type BaselineKind = 'memory' | 'pg' | 'postgres' | 'floor'

/** The source of each kind, in bench/: both PostgreSQL drivers share one, picked by BENCH_DRIVER. */
const BASELINE_SOURCES = { memory: 'baseline.ts', pg: 'baseline-postgres.ts', postgres: 'baseline-postgres.ts', floor: 'floor.ts' } as const

export type CompiledBaselines = Record<BaselineKind, string>

/**
 * The baselines and the floor as plain JavaScript, each one bundled file with its drivers and libraries,
 * run by `node` without a loader: a server started through tsx would carry the loader's cost and memory.
 */
export async function compileBaselines(dir: string): Promise<CompiledBaselines> {
  const outdir = path.join(dir, 'baselines')
  const sources = [...new Set(Object.values(BASELINE_SOURCES))]
  await esbuild.build({
    entryPoints: sources.map((source) => path.join(import.meta.dirname, source)),
    outdir,
    bundle: true,
    platform: 'node',
    target: `node${process.versions.node.split('.')[0] ?? '24'}`,
    // CommonJS: node-postgres is CommonJS and requires Node's modules, which an ESM bundle cannot.
    format: 'cjs',
    outExtension: { '.js': '.cjs' },
    // node-postgres's optional native binding, never installed here.
    external: ['pg-native'],
    logLevel: 'warning',
  })
  const compiled = (source: string) => path.join(outdir, source.replace(/\.ts$/, '.cjs'))
  return {
    memory: compiled(BASELINE_SOURCES.memory),
    pg: compiled(BASELINE_SOURCES.pg),
    postgres: compiled(BASELINE_SOURCES.postgres),
    floor: compiled(BASELINE_SOURCES.floor),
  }
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
async function readBack(baseUrl: string, key: string, dbPath: string | undefined): Promise<{ pets: Pet[]; source: string }> {
  const pets: Pet[] = []
  let url: string | undefined = `${baseUrl}/v1/pets?limit=100`
  while (url !== undefined) {
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
    const page = (await response.json()) as Pet[]
    if (response.status !== 200) throw new Error(`reading back: GET ${url} answered ${response.status}`)
    pets.push(...page)
    const next = /<([^>]+)>\s*;\s*rel="?next"?/.exec(response.headers.get('link') ?? '')?.[1]
    url = next === undefined || page.length === 0 ? undefined : new URL(next, baseUrl).href
  }
  if (pets.length >= SEED_PETS || dbPath === undefined) return { pets, source: 'the API (Link rel="next" pages)' }

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

/** Where the service keeps its pets: a SQLite file in the temp folder, or a PostgreSQL server. */
export type Engine = { name: 'sqlite' } | { name: 'postgres'; url: string }

export interface Setup {
  dir: string
  engine: Engine
  /** The service's DATABASE_URL: the seeded SQLite file, or the PostgreSQL server's. */
  databaseUrl: string
  key: string
  /** What drives the servers in the measured rounds. */
  tool: LoadTool
  service: PetstoreProcess
  serviceLog: string
  /** The service's Prometheus endpoint. */
  metricsUrl: string
  ids: string[]
  idsFile: string
  pets: Pet[]
  /** VmHWM of the service once seeded: a peak reached here is not the measured traffic's. */
  seeding: { pets: number; seconds: number; readBackFrom: string; servicePeakRssMb: number }
}

/** Key, service, 10,000 pets through the API, and the same pets on disk for the baseline. */
export async function setUp(dir: string, engine: Engine, started: Set<NodeProcess>, signal: AbortSignal): Promise<Omit<Setup, 'tool'>> {
  const dbPath = engine.name === 'sqlite' ? path.join(dir, 'petstore.db') : undefined
  // Only what the run needs: nothing from this shell (a DATABASE_URL, a PETSTORE_ENV) leaks in.
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: engine.name === 'postgres' ? engine.url : `sqlite://${dbPath}` }
  const key = await createKey(env, 'bench')
  const { service, log: serviceLog, metricsUrl } = await startService(dir, 'service', env, started)
  console.log(`bench: service pid ${service.pid} on ${service.baseUrl}; database and logs in ${dir}`)

  const seedStart = Date.now()
  await createPets(service.baseUrl, key, { count: SEED_PETS, concurrency: SEED_CONCURRENCY, body: (n) => petBody(n, 'seed'), signal })
  const seedMs = Date.now() - seedStart
  const { pets, source } = await readBack(service.baseUrl, key, dbPath)
  if (pets.length !== SEED_PETS) throw new Error(`read back ${pets.length} pets, expected ${SEED_PETS}`)
  if (pets.some((pet) => !Number.isSafeInteger(pet.id) || !Number.isSafeInteger(pet.categoryId))) {
    throw new Error('an id beyond 2^53: the baseline keeps ids as JavaScript numbers')
  }
  const ids = pets.map((pet) => String(pet.id))
  const idsFile = path.join(dir, 'ids.json')
  fs.writeFileSync(idsFile, JSON.stringify(ids))
  const servicePeakRssMb = megabytes(procStatusKb(service.pid, 'VmHWM'))
  console.log(
    `bench: seeded ${count(SEED_PETS)} pets through POST /v1/pets in ${seconds(seedMs)} (${count(SEED_PETS / (seedMs / 1000))}/s), ` +
      `read back from ${source}; service peak RSS so far ${servicePeakRssMb.toFixed(1)} MB`,
  )
  return {
    dir,
    engine,
    databaseUrl: env.DATABASE_URL,
    key,
    service,
    serviceLog,
    metricsUrl,
    ids,
    idsFile,
    pets,
    seeding: { pets: SEED_PETS, seconds: round(seedMs / 1000, 1), readBackFrom: source, servicePeakRssMb },
  }
}

/** The service's own count of its 503s by cause (the request log line does not name the error code). */
export async function refusalCounters(metricsUrl: string): Promise<string> {
  try {
    const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(2_000) })).text()
    const lines = text.split('\n').filter((line) => /^petstore_(db_unavailable_total|overload_rejections_total)\b/.test(line))
    return `the service's 503 counters: ${lines.join('; ') || 'none found'}`
  } catch (error) {
    return `the service's metrics could not be read: ${(error as Error).message}`
  }
}

/**
 * `petstore serve` as the run measures it, on the database of `env` (PATH and the DATABASE_ variables), its
 * request log `<name>.log` in the temp folder; the first seeds the database, any other (`--pooler`) serves
 * the same pets.
 */
export async function startService(
  dir: string,
  name: string,
  env: Record<string, string>,
  started: Set<NodeProcess>,
  /** Another build's bin/petstore.js; absent: this checkout's. */
  bin?: string,
): Promise<{ service: PetstoreProcess; log: string; metricsUrl: string }> {
  const log = path.join(dir, `${name}.log`)
  // Metrics on a free port of their own, as in production, and known here: a failed run reads them.
  const metricsPort = await freePort()
  const service = await startPetstore({
    cwd: ROOT,
    env: {
      ...env,
      // Every request line is really written, to a file as in production; not dropped by the level.
      LOG_LEVEL: 'info',
      // The limiter still runs on every request, so its cost is measured, but never rejects the one key.
      RATE_LIMIT_PER_KEY: '1000000000',
      // Likewise the load shedder samples the event loop as in production (0 turns only the comparison off:
      // @fastify/under-pressure keeps its histogram, its timer and its hook), but a 503 would stop the run.
      // A high threshold does not do: a sample of 250 ms with no event-loop reading, the process starved of
      // the CPU that long on a shared machine, counts as an infinite delay whatever the threshold
      // (findings.md, The load shedder on a starved process).
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      SHUTDOWN_DRAIN_MS: '0',
      METRICS_PORT: String(metricsPort),
    },
    logPath: log,
    detached: true,
    timeoutMs: READY_TIMEOUT_MS,
    ...(bin === undefined ? {} : { bin }),
  })
  started.add(service)
  void service.exited.then(() => started.delete(service))
  return { service, log, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` }
}

/**
 * A compiled baseline (or the floor) in its own process, with plain `node`; resolves once it answers.
 * memory: the seeded pets in memory (the SQLite run); pg and postgres: the service's tables through that
 * driver; floor: the store of the engine's baseline, memory or node-postgres. The floor writes its
 * request log next to the service's.
 */
export async function startBaseline(
  setup: Setup,
  kind: BaselineKind,
  compiled: CompiledBaselines,
  started: Set<NodeProcess>,
): Promise<{ process: NodeProcess; url: string }> {
  const port = await freePort()
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', PORT: String(port), BENCH_KEY: setup.key }
  if (kind === 'floor') env.BENCH_LOG_FILE = path.join(setup.dir, 'floor-requests.log')
  if (setup.engine.name === 'postgres' && kind !== 'memory') {
    env.BENCH_DATABASE_URL = setup.engine.url
    if (kind !== 'floor') env.BENCH_DRIVER = kind
  } else if (kind === 'memory' || kind === 'floor') {
    env.BENCH_PETS_FILE = path.join(setup.dir, 'pets.json')
    if (!fs.existsSync(env.BENCH_PETS_FILE)) fs.writeFileSync(env.BENCH_PETS_FILE, JSON.stringify(setup.pets))
  } else {
    throw new Error(`the ${kind} baseline needs the PostgreSQL engine`)
  }
  const baseline = spawnNode(kind === 'floor' ? 'floor' : `baseline (${kind})`, [compiled[kind]], {
    cwd: ROOT,
    env,
    logPath: path.join(setup.dir, `baseline-${kind}.log`),
    detached: true,
  })
  started.add(baseline)
  void baseline.exited.then(() => started.delete(baseline))
  const url = `http://127.0.0.1:${port}`
  await waitUntilReady(baseline, `${url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${setup.key}` }, timeoutMs: READY_TIMEOUT_MS })
  return { process: baseline, url }
}
