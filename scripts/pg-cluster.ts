// PostgreSQL as fleets run it, for the tests and scripts/fleet.ts: Debian's PostgreSQL servers (a primary, its
// streaming standbys, promotion) and a PgBouncer in front, on 127.0.0.1, each in a folder of its own under the
// OS temp folder. Run as root, the servers and the pooler run as the `postgres` user that Debian's packages
// make (neither will run as root). Nothing is downloaded: `apt-get install postgresql pgbouncer` (.ci/run)
// brings the programs, and `clusterUnavailable()` says why they cannot run here when they cannot.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import pg from 'pg'
import { freePort } from './petstore-process.js'

const run = promisify(execFile)

/** The newest Debian PostgreSQL's programs, e.g. /usr/lib/postgresql/15/bin, if installed. */
function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql'
  if (!fs.existsSync(root)) return undefined
  const versions = fs.readdirSync(root).filter((name) => /^\d+$/.test(name) && fs.existsSync(path.join(root, name, 'bin', 'pg_ctl')))
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0]
  return newest === undefined ? undefined : path.join(root, newest, 'bin')
}

const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((file) => fs.existsSync(file))

/** The user the servers run as: `postgres` when this process is root, else this process's own. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'))
  const [, , uid, gid] = line?.split(':') ?? []
  if (uid === undefined || gid === undefined) throw new Error('running as root, and there is no `postgres` user to run PostgreSQL as')
  return { uid: Number(uid), gid: Number(gid) }
}

/** Why a PgBouncer cannot be started here, or undefined when it can. */
export function poolerUnavailable(): string | undefined {
  return PGBOUNCER === undefined ? 'PgBouncer is not installed (apt-get install pgbouncer)' : undefined
}

/** Why PostgreSQL clusters and PgBouncer cannot be started here, or undefined when they can. */
export function clusterUnavailable(): string | undefined {
  if (postgresBin() === undefined) return "Debian's PostgreSQL is not installed (apt-get install postgresql)"
  return poolerUnavailable()
}

/** `program args…` as the server user, in a folder it owns. */
function asServerUser(program: string, args: string[]): [string, string[]] {
  return serverUser() === undefined ? [program, args] : ['runuser', ['-u', 'postgres', '--', program, ...args]]
}

async function runAsServerUser(program: string, args: string[]): Promise<string> {
  const [file, argv] = asServerUser(program, args)
  const { stdout } = await run(file, argv, { maxBuffer: 16 * 1024 * 1024 })
  return stdout
}

/** A new folder under the OS temp folder, owned by the server user. */
function serverDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  const user = serverUser()
  if (user !== undefined) fs.chownSync(dir, user.uid, user.gid)
  fs.chmodSync(dir, 0o700)
  return dir
}

/** Every server and pooler this process started, stopped at its exit whatever happened. */
const started = new Set<() => void>()
process.once('exit', () => {
  for (const kill of started) kill()
})

export interface PostgresNode {
  readonly port: number
  /** The data folder. */
  readonly dir: string
  /** URL of `database` on this server, as the superuser `postgres` (trusted on 127.0.0.1). */
  url(database?: string): string
  /** One statement through a short-lived connection. */
  query<Row extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<Row[]>
  /** `pg_ctl stop`: `fast` ends sessions and checkpoints, `immediate` is a crash. */
  stop(mode: 'fast' | 'immediate'): Promise<void>
  start(): Promise<void>
  /** A standby becomes a primary. */
  promote(): Promise<void>
  /** Stops the server if it runs and deletes its data. */
  destroy(): Promise<void>
}

/** Settings of every server: a small, quick one that can stream to standbys. */
const SETTINGS = [
  "listen_addresses = '127.0.0.1'",
  'wal_level = replica',
  'max_wal_senders = 8',
  'hot_standby = on',
  'fsync = off',
  'full_page_writes = off',
  'shared_buffers = 32MB',
  "log_min_messages = 'warning'",
]

function postgresNode(dir: string, port: number): PostgresNode {
  const bin = postgresBin() ?? ''
  const options = `-c port=${port} -c unix_socket_directories=${dir}`
  const pidFile = path.join(dir, 'data', 'postmaster.pid')
  const kill = () => {
    try {
      const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0])
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGQUIT')
    } catch {
      // Not running.
    }
  }
  const node: PostgresNode = {
    port,
    dir,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async query<Row extends pg.QueryResultRow>(text: string, values?: unknown[]) {
      const client = new pg.Client({ connectionString: node.url(), connectionTimeoutMillis: 5_000 })
      client.on('error', () => {})
      await client.connect()
      try {
        return (await client.query<Row>(text, values)).rows
      } finally {
        await client.end().catch(() => {})
      }
    },
    async stop(mode) {
      await runAsServerUser(path.join(bin, 'pg_ctl'), ['stop', '-D', path.join(dir, 'data'), '-m', mode, '-w', '-t', '60'])
    },
    async start() {
      await runAsServerUser(path.join(bin, 'pg_ctl'), ['start', '-D', path.join(dir, 'data'), '-w', '-t', '60', '-l', path.join(dir, 'log'), '-o', options])
      started.add(kill)
    },
    async promote() {
      await runAsServerUser(path.join(bin, 'pg_ctl'), ['promote', '-D', path.join(dir, 'data'), '-w', '-t', '60'])
    },
    async destroy() {
      kill()
      for (let i = 0; i < 100 && fs.existsSync(pidFile); i++) await sleep(50)
      started.delete(kill)
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
  return node
}

/** A new primary on a free port: trusted connections from 127.0.0.1, replication included. */
export async function startPrimary(options: { maxConnections?: number } = {}): Promise<PostgresNode> {
  const bin = postgresBin()
  if (bin === undefined) throw new Error(clusterUnavailable())
  const dir = serverDir('petstore-pg15-')
  await runAsServerUser(path.join(bin, 'initdb'), ['-D', path.join(dir, 'data'), '--auth=trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
  const settings = [...SETTINGS, `max_connections = ${options.maxConnections ?? 100}`, 'superuser_reserved_connections = 3']
  fs.appendFileSync(path.join(dir, 'data', 'postgresql.conf'), `${settings.join('\n')}\n`)
  const node = postgresNode(dir, await freePort())
  await node.start()
  return node
}

/**
 * A streaming standby of `primary` (pg_basebackup -R). `synchronous`: the primary's commits wait until
 * the standby has them, so none acknowledged is lost when the primary dies and this one is promoted.
 * `applyDelayMs`: it replays each commit that long after the primary made it (`recovery_min_apply_delay`).
 */
export async function startStandby(primary: PostgresNode, options: { synchronous?: boolean; applyDelayMs?: number } = {}): Promise<PostgresNode> {
  const bin = postgresBin() ?? ''
  const dir = serverDir('petstore-pg15-standby-')
  await runAsServerUser(path.join(bin, 'pg_basebackup'), [
    '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', path.join(dir, 'data'), '-R', '-X', 'stream', '-c', 'fast',
  ])
  // Its walreceiver's application_name, which synchronous_standby_names names: with '*', the standby that
  // connected first would be the synchronous one, whichever was asked to be.
  const name = path.basename(dir).replaceAll(/\W/g, '_')
  // A walreceiver that lost its primary tries again every wal_retrieve_retry_interval (5 s by default), and
  // a synchronous standby's primary commits nothing until it is back: a tried restart of the primary would
  // measure that interval, a multiple of 5 s (15 s seen under load), rather than the service.
  fs.appendFileSync(path.join(dir, 'data', 'postgresql.auto.conf'), `cluster_name = '${name}'\nwal_retrieve_retry_interval = '250ms'\n`)
  if (options.applyDelayMs !== undefined) {
    fs.appendFileSync(path.join(dir, 'data', 'postgresql.auto.conf'), `recovery_min_apply_delay = '${options.applyDelayMs}ms'\n`)
  }
  const streaming = async () => (await primary.query<{ count: string }>('SELECT count(*) FROM pg_stat_replication'))[0]?.count ?? '0'
  const before = Number(await streaming())
  const node = postgresNode(dir, await freePort())
  await node.start()
  for (let i = 0; Number(await streaming()) <= before; i++) {
    if (i > 200) throw new Error('the standby did not start streaming')
    await sleep(50)
  }
  if (options.synchronous === true) {
    await primary.query(`ALTER SYSTEM SET synchronous_standby_names = '"${name}"'`)
    await primary.query('SELECT pg_reload_conf()')
  }
  const wanted = options.synchronous === true ? 'sync' : 'async'
  for (let i = 0; ; i++) {
    const rows = await primary.query<{ sync_state: string }>('SELECT sync_state FROM pg_stat_replication WHERE application_name = $1', [name])
    if (rows.some((row) => row.sync_state === wanted)) break
    if (i > 200) throw new Error(`the standby did not become ${wanted}: ${JSON.stringify(rows)}`)
    await sleep(50)
  }
  return node
}

/** Makes standby `standby` stream from `primary` instead (a primary promoted after a failover): a reload, no restart. */
export async function follow(standby: PostgresNode, primary: PostgresNode): Promise<void> {
  await standby.query(`ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres'`)
  await standby.query('SELECT pg_reload_conf()')
}

/** What a pooler connects to: a server of this module's, or any other on 127.0.0.1 with its credentials. */
export interface PoolerTarget {
  readonly port: number
  readonly user?: string
  readonly password?: string
}

export interface PoolerSettings {
  /** PgBouncer's `pool_mode`. */
  poolMode?: 'transaction' | 'session'
  /** Server connections per database and user pair (`default_pool_size`). */
  poolSize?: number
  /** Server connections in all (`max_db_connections`). */
  maxDbConnections?: number
  /** Seconds before a failed server login is tried again (`server_login_retry`, PgBouncer's default 15). */
  serverLoginRetry?: number
  /** Seconds an idle server connection is kept (`server_idle_timeout`, PgBouncer's default 600). */
  serverIdleTimeout?: number
}

export interface Pooler {
  readonly port: number
  /** URL of `database` through the pooler. */
  url(database?: string): string
  /** A command of the admin console (`PAUSE`, `RESUME`, `RELOAD`, `SHOW POOLS`…), its rows. */
  admin(command: string): Promise<Record<string, unknown>[]>
  /** Points the pooler at another server: rewrites its configuration and RELOADs it. */
  repoint(server: PoolerTarget): Promise<void>
  destroy(): Promise<void>
}

/**
 * A PgBouncer on a free port in front of `server`: every database name is passed through (`* = …`),
 * its clients are trusted, and `postgres` may use the admin console.
 */
export async function startPgBouncer(server: PoolerTarget, settings: PoolerSettings = {}): Promise<Pooler> {
  if (PGBOUNCER === undefined) throw new Error(poolerUnavailable())
  const dir = serverDir('petstore-pgbouncer-')
  const port = await freePort()
  const ini = path.join(dir, 'pgbouncer.ini')
  const write = (target: PoolerTarget) => {
    const credentials = target.user === undefined ? '' : ` user=${target.user}${target.password === undefined ? '' : ` password=${target.password}`}`
    const lines = [
      '[databases]',
      `* = host=127.0.0.1 port=${target.port}${credentials}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'admin_users = postgres',
      `pool_mode = ${settings.poolMode ?? 'transaction'}`,
      `default_pool_size = ${settings.poolSize ?? 20}`,
      `max_db_connections = ${settings.maxDbConnections ?? 0}`,
      'max_client_conn = 2000',
      `server_login_retry = ${settings.serverLoginRetry ?? 15}`,
      'server_connect_timeout = 3',
      `server_idle_timeout = ${settings.serverIdleTimeout ?? 600}`,
      'query_wait_timeout = 120',
      `logfile = ${path.join(dir, 'log')}`,
      `pidfile = ${path.join(dir, 'pid')}`,
    ]
    fs.writeFileSync(ini, `${lines.join('\n')}\n`)
  }
  fs.writeFileSync(path.join(dir, 'users.txt'), '"postgres" ""\n')
  write(server)
  const user = serverUser()
  if (user !== undefined) for (const file of ['pgbouncer.ini', 'users.txt']) fs.chownSync(path.join(dir, file), user.uid, user.gid)
  const [file, argv] = asServerUser(PGBOUNCER, [ini])
  const child: ChildProcess = spawn(file, argv, { stdio: 'ignore' })
  const kill = () => {
    // runuser passes signals on; the pooler's own pid is in its pid file once it runs.
    try {
      process.kill(Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8')), 'SIGKILL')
    } catch {
      child.kill('SIGKILL')
    }
  }
  started.add(kill)
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`
  const admin = async (command: string) => {
    const client = new pg.Client({ connectionString: url('pgbouncer'), connectionTimeoutMillis: 5_000 })
    client.on('error', () => {})
    await client.connect()
    try {
      return (await client.query<Record<string, unknown>>(command)).rows
    } finally {
      await client.end().catch(() => {})
    }
  }
  for (let i = 0; ; i++) {
    try {
      await admin('SHOW VERSION')
      break
    } catch (error) {
      if (i > 100 || child.exitCode !== null) {
        throw new Error(`PgBouncer did not start: ${(error as Error).message}\n${fs.readFileSync(path.join(dir, 'log'), 'utf8').slice(-2000)}`, { cause: error })
      }
      await sleep(50)
    }
  }
  return {
    port,
    url,
    admin,
    async repoint(target) {
      write(target)
      await admin('RELOAD')
    },
    async destroy() {
      kill()
      started.delete(kill)
      if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once('exit', resolve))
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * A primary with two streaming standbys, as a fleet reading from standbys runs (docs/decisions/0023-read-replicas.md):
 * `standby` synchronous, so that a failover onto it loses nothing acknowledged, and `delayed`, which replays each
 * commit `applyDelayMs` late; each behind a PgBouncer in transaction mode of its own when `poolers`.
 */
export interface ReplicaCluster {
  readonly primary: PostgresNode
  readonly standby: PostgresNode
  readonly delayed: PostgresNode
  /** In front of the primary, the standby and the delayed standby, in that order; none unless asked for. */
  readonly poolers: readonly Pooler[]
  /** DATABASE_URL and DATABASE_REPLICA_URLS of `database`, directly or through the poolers. */
  env(database: string, through: 'direct' | 'poolers'): Record<string, string>
  destroy(): Promise<void>
}

export async function startReplicaCluster({ applyDelayMs, poolers: pooled = false, databases = [] }: { applyDelayMs: number; poolers?: boolean; databases?: readonly string[] }): Promise<ReplicaCluster> {
  const primary = await startPrimary()
  // Made before the standbys are copied, so that the delayed one has them at once.
  for (const database of databases) await primary.query(`CREATE DATABASE ${database}`)
  const delayed = await startStandby(primary, { applyDelayMs })
  const standby = await startStandby(primary, { synchronous: true })
  const servers = [primary, standby, delayed]
  const poolers = pooled ? await Promise.all(servers.map((server) => startPgBouncer(server, { poolMode: 'transaction', poolSize: 10, serverLoginRetry: 1 }))) : []
  return {
    primary,
    standby,
    delayed,
    poolers,
    env(database, through) {
      const [url, ...replicas] = (through === 'poolers' ? poolers : servers).map((server) => server.url(database))
      const env: Record<string, string> = { DATABASE_URL: url ?? '', DATABASE_REPLICA_URLS: replicas.join(',') }
      if (through === 'poolers') env.DATABASE_PREPARED_STATEMENTS = 'false'
      return env
    },
    async destroy() {
      for (const pooler of poolers) await pooler.destroy()
      for (const server of [delayed, standby, primary]) await server.destroy()
    },
  }
}

/** The client connections PostgreSQL holds right now, the pooler's and anyone's (its own walsenders excepted). */
export async function clientConnections(server: PostgresNode): Promise<number> {
  const rows = await server.query<{ count: string }>("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
  return Number(rows[0]?.count ?? 0) - 1
}
