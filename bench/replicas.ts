// Reads with standbys against reads without, in the same rounds (issue 43, docs/decisions/0023-read-replicas.md):
// `npm run bench:replicas [-- --rounds N]`. A primary and two streaming standbys of Debian's PostgreSQL
// (scripts/pg-cluster.ts), 10,000 pets, and two `petstore serve` on them: one with every query on the primary,
// one with DATABASE_REPLICA_URLS naming both standbys. Each round drives each once with wrk (bench/wrk.ts), in
// turns, for getPet, a first page with a next one (standby-served), a filtered page and the pages of many walks. It reports, it does not
// judge: on a machine of a few cores the servers, the load generator and the three PostgreSQL servers share it.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs, promisify } from 'node:util'
import pg from 'pg'
import { clusterUnavailable, startReplicaCluster } from '../scripts/pg-cluster.js'
import { encodeCursor } from '../src/pets/pets.cursor.js'
import { type PetstoreProcess, ROOT, createKey, freePort, startPetstore, stopProcess } from '../scripts/petstore-process.js'
import type { LoadOptions, LoadResult } from './load.js'
import type { ScenarioId } from './scenarios.js'
import { parseWrk, wrkArgs, wrkScript } from './wrk.js'

const PETS = 10_000
const CONNECTIONS = 50
const ROUND_S = 2
/**
 * `walk`: pages of 20 after ids spread over the seeded ones, each cursor as a walk's next page carries it
 * (`p1`, no position: any standby in the bound may answer), so that nearly every page misses the read
 * cache and is read from the database, as the pages of many clients' walks are.
 */
type Scenario = ScenarioId | 'walk'
const SCENARIOS: readonly Scenario[] = ['getOne', 'list20', 'list100', 'walk']
const SERVERS = ['primary only', 'with standbys'] as const

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '8' } }, strict: true })
const rounds = Number(values.rounds)
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a whole number from 1, got ${values.rounds}`)
const unavailable = clusterUnavailable()
if (unavailable !== undefined) throw new Error(`bench:replicas needs ${unavailable}`)

const median = (numbers: number[]) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

/** wrk's script and arguments for `walk`: the same stride over the cursors as getOne's over the ids. */
function walkRun(options: Omit<LoadOptions, 'scenario'>, script: string): string[] {
  const cursors = Array.from({ length: PETS - 100 }, (_, i) => encodeCursor(BigInt(i + 1), undefined))
  const lines = [
    `wrk.headers["Authorization"] = ${JSON.stringify(`Bearer ${options.key}`)}`,
    `local cursors = { ${cursors.map((cursor) => JSON.stringify(cursor)).join(', ')} }`,
    'local index = 0',
    'request = function()',
    '  index = (index + 7919) % #cursors',
    '  return wrk.format("GET", "/v1/pets?limit=20&cursor=" .. cursors[index + 1])',
    'end',
  ]
  fs.writeFileSync(script, `${lines.join('\n')}\n`)
  return ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--timeout', '10s', '--latency', '-s', script, `${options.baseUrl}/v1/pets`]
}

async function wrk(options: Omit<LoadOptions, 'scenario'> & { scenario: Scenario }, ids: readonly string[], dir: string): Promise<LoadResult> {
  const script = path.join(dir, 'wrk.lua')
  const { scenario } = options
  let args: string[]
  if (scenario === 'walk') args = walkRun(options, script)
  else {
    fs.writeFileSync(script, wrkScript({ ...options, scenario }, ids))
    args = wrkArgs({ ...options, scenario }, script)
  }
  try {
    const { stdout, stderr } = await promisify(execFile)('wrk', args, { timeout: (options.durationS + 30) * 1000 })
    return parseWrk(0, stdout + stderr)
  } catch (error) {
    const { code, stdout = '', stderr = '' } = error as { code?: number; stdout?: string; stderr?: string }
    return parseWrk(code ?? null, stdout + stderr)
  }
}

/** petstore_db_reads_total of the server's metrics, by read and target. */
async function readsByTarget(metricsPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  return Object.fromEntries([...text.matchAll(/^petstore_db_reads_total\{read="(\w+)",target="(\w+)"\} (\d+)/gm)].map((match) => [`${match[1]} ${match[2]}`, Number(match[3])]))
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-bench-replicas-'))
const cluster = await startReplicaCluster({ applyDelayMs: 0, databases: ['petstore'] })
const started: PetstoreProcess[] = []
try {
  const { DATABASE_URL = '', DATABASE_REPLICA_URLS = '' } = cluster.env('petstore', 'direct')
  const base = { PATH: process.env.PATH ?? '', DATABASE_URL, RATE_LIMIT_PER_KEY: '0', LOG_LEVEL: 'warn', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' }
  const key = await createKey(base, 'bench-replicas')
  // Seeded in one statement: the reads are measured, not the creates.
  const seeder = new pg.Client({ connectionString: DATABASE_URL })
  await seeder.connect()
  try {
    await seeder.query(
      `INSERT INTO pets (name, category_id, status, created_at)
       SELECT 'pet ' || g, 1 + g % 50, (ARRAY['available', 'pending', 'sold', NULL])[1 + g % 4], 0 FROM generate_series(1, ${PETS}) g`,
    )
  } finally {
    await seeder.end()
  }
  const idsFile = path.join(dir, 'ids.json')
  const ids = Array.from({ length: PETS }, (_, i) => String(i + 1))
  fs.writeFileSync(idsFile, JSON.stringify(ids))
  const servers = new Map<(typeof SERVERS)[number], { process: PetstoreProcess; metricsPort: number }>()
  for (const [name, env] of [
    ['primary only', base],
    ['with standbys', { ...base, DATABASE_REPLICA_URLS }],
  ] as const) {
    const metricsPort = await freePort()
    const server = await startPetstore({ cwd: dir, env: { ...env, METRICS_PORT: String(metricsPort) } })
    started.push(server)
    servers.set(name, { process: server, metricsPort })
  }
  const results = new Map<string, LoadResult[]>()
  console.log(`bench:replicas: ${rounds} rounds of ${ROUND_S} s per server and scenario, ${CONNECTIONS} connections, wrk, ${PETS} pets`)
  for (const scenario of SCENARIOS) {
    for (let round = 0; round < rounds; round++) {
      // In turns: each server first in half the rounds.
      const order = round % 2 === 0 ? SERVERS : [...SERVERS].reverse()
      for (const name of order) {
        const result = await wrk(
          { baseUrl: servers.get(name)?.process.baseUrl ?? '', key, scenario, connections: CONNECTIONS, durationS: ROUND_S, idsFile, namePrefix: 'bench' },
          ids,
          dir,
        )
        if (result.non2xx > 0 || result.errors > 0) throw new Error(`${name}, ${scenario}: ${result.non2xx} non-2xx, ${result.errors} errors`)
        results.set(`${scenario} ${name}`, [...(results.get(`${scenario} ${name}`) ?? []), result])
      }
    }
    const [without, withStandbys] = SERVERS.map((name) => results.get(`${scenario} ${name}`) ?? [])
    const rps = (runs: LoadResult[] | undefined) => median((runs ?? []).map((run) => run.requestsPerSecond))
    const p99 = (runs: LoadResult[] | undefined) => median((runs ?? []).map((run) => run.latencyMs.p99))
    const ratios = (withStandbys ?? []).map((run, i) => run.requestsPerSecond / (without?.[i]?.requestsPerSecond ?? Number.NaN))
    console.log(
      `${scenario.padEnd(8)} primary only ${rps(without).toFixed(0)} req/s (p99 ${p99(without).toFixed(1)} ms); ` +
        `with standbys ${rps(withStandbys).toFixed(0)} req/s (p99 ${p99(withStandbys).toFixed(1)} ms); ` +
        `ratio, median of rounds ${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)})`,
    )
  }
  const reads = await readsByTarget(servers.get('with standbys')?.metricsPort ?? 0)
  console.log(`bench:replicas: reads of the server with standbys, by target: ${JSON.stringify(reads)}`)
  const file = path.join(ROOT, 'bench', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}-replicas.json`)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, `${JSON.stringify({ rounds, roundS: ROUND_S, connections: CONNECTIONS, pets: PETS, cpus: os.cpus().length, reads, results: Object.fromEntries(results) }, null, 2)}\n`)
  console.log(`bench:replicas: wrote ${path.relative(ROOT, file)}`)
} finally {
  await Promise.all(started.map((server) => stopProcess(server, { killAfterMs: 5_000 })))
  await cluster.destroy()
  fs.rmSync(dir, { recursive: true, force: true })
}
