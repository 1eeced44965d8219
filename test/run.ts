import { spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { clusterUnavailable, poolerUnavailable, startPgBouncer, startReplicaCluster } from '../scripts/pg-cluster.js'
import { poolerOff, postgresOff, startEmbeddedPostgres } from './postgres.js'

/*
 * Runs test files with `node --test`, with a PostgreSQL server for the tests of that engine: the one
 * PETSTORE_TEST_DATABASE_URL names, or else a throwaway embedded server started here for the whole
 * run (so a fresh machine needs no setup) and destroyed afterwards; and a PgBouncer in front of it
 * when PgBouncer is installed, unless PETSTORE_TEST_POOLER=off (test/postgres.ts).
 *
 *   node --import tsx test/run.ts [--fast] [file or folder ...]
 *
 * Without a file or folder, every test/**\/*.test.ts. --fast leaves out PROCESS_TESTS, and makes any
 * other test that starts a process fail (test/no-processes.ts), so the list cannot silently go stale.
 *
 * Files run CONCURRENCY at a time, each in its own process: most of a file's time is spent waiting on the
 * processes and databases it starts, so even a 2-core machine runs two at once (Node's default there is
 * one). Every test makes its own database, directory and ports, so files never share state.
 */
const CONCURRENCY = Math.max(2, os.availableParallelism() - 1)

/** The tests that start a process: the service, the CLI as a process, npm, a browser, Redis or a database server of their own. */
const PROCESS_TESTS = [
  'api-keys/keys-rotate.test.ts',
  'api-keys/rate-limit.test.ts',
  'api-keys/redaction.test.ts',
  'cli-errors.test.ts',
  'cli.test.ts',
  'client.test.ts',
  'copy/copy.test.ts',
  'deprecations/deprecation-usage.test.ts',
  'embedded-postgres.test.ts',
  'fault-matrix.test.ts',
  'footprint.test.ts',
  'free-port.test.ts',
  'http/cors-browser.test.ts',
  'http/docs-browser.test.ts',
  'http/metrics.test.ts',
  'http/overload.test.ts',
  'http/tls.test.ts',
  'linger-guard.test.ts',
  'logging.test.ts',
  'operator.test.ts',
  'ops/nginx.test.ts',
  'ops/prometheus.test.ts',
  'ops/kubernetes.test.ts',
  'ops/systemd.test.ts',
  'package.test.ts',
  'process-group.test.ts',
  'process/probes.test.ts',
  'process/burst.test.ts',
  'process/connection-bounds.test.ts',
  'process/life.test.ts',
  'readme.test.ts',
  'process/runtime.test.ts',
  'process/shutdown-under-load.test.ts',
  'storage/backup.test.ts',
  'storage/private-files.test.ts',
  'storage/durability.test.ts',
  'storage/fleet.test.ts',
  'storage/compatibility.test.ts',
  'storage/migrations.test.ts',
  'storage/multi-instance.test.ts',
  'storage/outage.test.ts',
  'storage/pooler.test.ts',
  'storage/sqlite-file-process.test.ts',
  'tracing/tracing.test.ts',
  'process/workers.test.ts',
  'upgrade/rolling-upgrade.test.ts',
]

/**
 * The suites whose subject is the same on every Node line: the faults of the databases and of the process
 * under load, a burst of connections (every other process test goes through the extra listening sockets
 * too, on every line), nginx in front, the pages in Chromium, the README's examples, the package's contents,
 * two releases on one database.
 * `PETSTORE_TEST_ONCE=off` leaves them out, as CI does on Node 24 and 22 (README, Tests).
 */
const ONCE_TESTS = [
  'fault-matrix.test.ts',
  'http/cors-browser.test.ts',
  'http/docs-browser.test.ts',
  'ops/nginx.test.ts',
  'package.test.ts',
  'process/burst.test.ts',
  'process/connection-bounds.test.ts',
  'readme.test.ts',
  'upgrade/rolling-upgrade.test.ts',
]

/**
 * A test that sets no timeout of its own fails after this long, instead of holding its file, and with it
 * the run, for ever. The longest suite, the fault matrix on one engine, takes about 2 minutes.
 */
const TEST_TIMEOUT_MS = 10 * 60_000

/**
 * The whole run is interrupted after this long: Node then reports the tests still running, by file and
 * name. A run on a 2-core machine ends well before it (README, Tests).
 */
const RUN_BOUND_MS = 30 * 60_000

/** The delayed standby of the contract suites' standbys replays each commit this late: longer than DATABASE_REPLICA_MAX_LAG_MS. */
const STANDBY_APPLY_DELAY_MS = 2_000

const TEST_DIR = import.meta.dirname
const args = process.argv.slice(2)
const fast = args.includes('--fast')
const given = args.filter((arg) => arg !== '--fast')

/** The test files under `dir`, in a stable order. */
function testFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.join(dir, file))
    .sort()
}

for (const file of [...PROCESS_TESTS, ...ONCE_TESTS]) {
  if (!fs.existsSync(path.join(TEST_DIR, file))) throw new Error(`test/run.ts names ${file}, which does not exist`)
}
const all = (given.length === 0 ? [TEST_DIR] : given).flatMap((arg) => (fs.statSync(arg).isDirectory() ? testFiles(arg) : [arg]))
const relative = (file: string) => path.relative(TEST_DIR, path.resolve(file))
const named = (list: string[]) => (file: string) => list.includes(relative(file))
const onceOff = process.env.PETSTORE_TEST_ONCE === 'off'
// Node runs and reports the files in alphabetical order, whatever order they are given in.
const files = all.filter((file) => !(fast && named(PROCESS_TESTS)(file)) && !(onceOff && named(ONCE_TESTS)(file)))
if (fast) process.stderr.write(`Fast run: ${files.length} test files, leaving out those that start processes.\n`)
if (onceOff) process.stderr.write(`PETSTORE_TEST_ONCE=off: ${ONCE_TESTS.join(', ')} left out.\n`)
// Given no file, node --test would run every one it finds, those left out too.
if (files.length === 0) {
  process.stderr.write('Nothing to run: every file given is left out.\n')
  process.exit(0)
}

const startedAt = performance.now()
const noPostgres = postgresOff()
if (noPostgres !== undefined) process.stderr.write(`${noPostgres}: the tests run on SQLite only; those of PostgreSQL skip.\n`)
const givenUrl = noPostgres === undefined ? process.env.PETSTORE_TEST_DATABASE_URL : undefined
const embedded = noPostgres === undefined && (givenUrl === undefined || givenUrl === '') ? await startEmbeddedPostgres() : undefined
if (embedded !== undefined) process.stderr.write('Started an embedded PostgreSQL server for the tests.\n')
const url = embedded?.url ?? givenUrl ?? ''
// The PostgreSQL tests run again through a PgBouncer in transaction mode, as fleets run: a few server
// connections shared by every test database (test/helper.ts, engine `pgbouncer`).
const noPooler = poolerOff() ?? poolerUnavailable()
const poolerFor = (server: URL) =>
  startPgBouncer(
    { port: Number(server.port), user: decodeURIComponent(server.username), password: decodeURIComponent(server.password) },
    { poolMode: 'transaction', poolSize: 4, serverIdleTimeout: 10 },
  )
const pooler = noPooler === undefined ? await poolerFor(new URL(url)) : undefined
if (pooler === undefined && noPostgres === undefined) process.stderr.write(`${noPooler}: the PostgreSQL tests through a pooler are left out.\n`)
// The contract suites run again with reads on standbys (test/helper.ts CONTRACT_ENGINES): Debian's PostgreSQL,
// since standbys are copied with its pg_basebackup, with the PgBouncers they also run through.
const noStandbys = noPooler ?? clusterUnavailable()
const standbys = noStandbys === undefined ? await startReplicaCluster({ applyDelayMs: STANDBY_APPLY_DELAY_MS, poolers: true }) : undefined
if (standbys === undefined && noPostgres === undefined) process.stderr.write(`${noStandbys}: the contract suites with standbys are left out.\n`)
const standbyServers = standbys === undefined ? '' : JSON.stringify({
  primaryUrl: standbys.primary.url(),
  ports: [standbys.primary, standbys.standby, standbys.delayed].map((server) => server.port),
  poolerPorts: standbys.poolers.map((pooler) => pooler.port),
})

// Every file's process ends once its tests have (test/linger-guard.ts); --fast also refuses processes.
const guards = ['--import', path.join(TEST_DIR, 'linger-guard.ts'), ...(fast ? ['--import', path.join(TEST_DIR, 'no-processes.ts')] : [])]
const testArgs = ['--test', `--test-timeout=${TEST_TIMEOUT_MS}`, `--test-concurrency=${CONCURRENCY}`, '--test-reporter=spec']
const child = spawn(process.execPath, ['--import', 'tsx', ...guards, ...testArgs, ...files], {
  stdio: 'inherit',
  env: { ...process.env, PETSTORE_TEST_DATABASE_URL: url, PETSTORE_TEST_POOLER_PORT: String(pooler?.port ?? ''), PETSTORE_TEST_STANDBYS: standbyServers },
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
const bound = setTimeout(() => {
  process.stderr.write(`The run has taken over ${RUN_BOUND_MS / 60_000} minutes: interrupting it.\n`)
  child.kill('SIGINT')
  setTimeout(() => child.kill('SIGKILL'), 30_000).unref()
}, RUN_BOUND_MS).unref()
const [code] = (await once(child, 'exit')) as [number | null]
clearTimeout(bound)
await pooler?.destroy()
await standbys?.destroy()
await embedded?.destroy()
process.stderr.write(`${files.length} test files in ${((performance.now() - startedAt) / 1000).toFixed(1)} s.\n`)
process.exit(code ?? 1)
