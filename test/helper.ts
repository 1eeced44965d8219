import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import { after, before } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import type { Scope } from '../src/api-keys/api-keys.scopes.js'
import { createApiKeysService } from '../src/api-keys/api-keys.service.js'
import { buildApp } from '../src/app.js'
import type { Clock } from '../src/shared/clock.js'
import { type Config, loadConfig } from '../src/config.js'
import type { Metrics } from '../src/http/metrics.js'
import { createLogger } from '../src/logger.js'
import { openStorage, type Storage } from '../src/repositories.js'
import { createPostgresDatabase, postgresOff } from './postgres.js'

/**
 * `pgbouncer`: PostgreSQL through a PgBouncer in transaction mode, with DATABASE_PREPARED_STATEMENTS=false.
 * `standbys`: a primary with a standby and a delayed standby in DATABASE_REPLICA_URLS; `standbys behind
 * PgBouncer`: each of them through a PgBouncer of its own (scripts/pg-cluster.ts startReplicaCluster).
 */
export type Engine = 'sqlite' | 'postgres' | 'pgbouncer' | 'standbys' | 'standbys behind PgBouncer'

/**
 * Every storage engine the storage-touching tests run on. PostgreSQL needs a server, and `pgbouncer`
 * a PgBouncer in front of it: `npm run test:unit` provides both (see test/run.ts; the pooler when it is
 * installed); a file run on its own without PETSTORE_TEST_DATABASE_URL tests SQLite only, and says so.
 */
export const ENGINES: readonly Engine[] = [
  'sqlite',
  ...(process.env.PETSTORE_TEST_DATABASE_URL ? (['postgres'] as const) : []),
  ...(process.env.PETSTORE_TEST_DATABASE_URL && process.env.PETSTORE_TEST_POOLER_PORT ? (['pgbouncer'] as const) : []),
]

/** Where test/run.ts started the cluster of the `standbys` engines, if it did (JSON of StandbyServers). */
const STANDBYS = process.env.PETSTORE_TEST_STANDBYS

/** The servers of the `standbys` engines: the primary's URL, and the ports of each server directly and through its pooler. */
export interface StandbyServers {
  primaryUrl: string
  /** The primary's, the standby's and the delayed standby's. */
  ports: number[]
  poolerPorts: number[]
}

/**
 * ENGINES and, when test/run.ts started them, the standbys engines: for the suites of the API's contract
 * (pets, pages, caching, authentication, scopes, idempotency, errors, deprecation), which must hold with reads
 * on standbys too.
 */
export const CONTRACT_ENGINES: readonly Engine[] = [
  ...ENGINES,
  ...(ENGINES.includes('pgbouncer') && STANDBYS ? (['standbys', 'standbys behind PgBouncer'] as const) : []),
]

/**
 * The engines reached directly, for the tests of the HTTP surface and of the process (the wire, validation,
 * shutdown, probes, workers): a pooler between the service and PostgreSQL changes nothing they test.
 */
export const DIRECT_ENGINES: readonly Engine[] = ENGINES.filter((engine) => engine !== 'pgbouncer')

/** The engine the service sees: `pgbouncer` is PostgreSQL. */
export function storageEngine(engine: Engine): 'sqlite' | 'postgres' {
  return engine === 'sqlite' ? 'sqlite' : 'postgres'
}
// Said only inside a test process: test/run.ts imports this module before it provides the server, and
// says it once itself when told to run without PostgreSQL.
if (!ENGINES.includes('postgres') && process.env.NODE_TEST_CONTEXT !== undefined && postgresOff() === undefined) {
  process.stderr.write('PETSTORE_TEST_DATABASE_URL is not set: PostgreSQL tests are left out of this run.\n')
}

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(public ms: number = Date.parse('2026-11-22T12:00:00Z')) {}
  now(): number {
    return this.ms
  }
  advance(ms: number): void {
    this.ms += ms
  }
}

/** A fresh, empty directory under the OS temp folder. */
export function tempDir(prefix = 'petstore-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix))
}

export interface TestDatabase {
  /** `DATABASE_URL` naming the new database. */
  env: Record<string, string>
  drop: () => Promise<void>
}

/** `DATABASE_URL` naming a SQLite file (not yet created) in `dir`. */
export function sqliteDatabaseEnv(dir: string): Record<string, string> {
  return { DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}` }
}

/** A new, empty database of `engine`: a file in `dir`, or a database on the test server. */
export async function createTestDatabase(engine: Engine, dir: string = tempDir()): Promise<TestDatabase> {
  if (engine === 'sqlite') {
    return {
      env: sqliteDatabaseEnv(dir),
      drop: async () => {
        fs.rmSync(path.join(dir, 'petstore.db'), { force: true })
      },
    }
  }
  if (engine === 'standbys' || engine === 'standbys behind PgBouncer') return createStandbysDatabase(engine)
  const server = process.env.PETSTORE_TEST_DATABASE_URL
  if (server === undefined || server === '') throw new Error('PETSTORE_TEST_DATABASE_URL is not set')
  const { url, drop } = await createPostgresDatabase(server)
  if (engine === 'postgres') return { env: { DATABASE_URL: url }, drop }
  const pooled = new URL(url)
  pooled.port = process.env.PETSTORE_TEST_POOLER_PORT ?? ''
  return { env: { DATABASE_URL: pooled.href, DATABASE_PREPARED_STATEMENTS: 'false' }, drop }
}

/** The servers of the `standbys` engines, when test/run.ts started them. */
export function standbyServers(): StandbyServers | undefined {
  return STANDBYS === undefined || STANDBYS === '' ? undefined : (JSON.parse(STANDBYS) as StandbyServers)
}

/** A new database on the primary of the standbys' cluster, which its standbys replay (the delayed one late). */
async function createStandbysDatabase(engine: 'standbys' | 'standbys behind PgBouncer'): Promise<TestDatabase> {
  const servers = standbyServers()
  if (servers === undefined) throw new Error('PETSTORE_TEST_STANDBYS is not set')
  const { url, drop } = await createPostgresDatabase(servers.primaryUrl)
  const [primary, ...replicas] = (engine === 'standbys' ? servers.ports : servers.poolerPorts).map((port) => {
    const on = new URL(url)
    on.port = String(port)
    return on.href
  })
  const env: Record<string, string> = { DATABASE_URL: primary ?? '', DATABASE_REPLICA_URLS: replicas.join(',') }
  if (engine === 'standbys behind PgBouncer') env.DATABASE_PREPARED_STATEMENTS = 'false'
  return { env, drop }
}

export interface TestApp {
  app: FastifyInstance
  storage: Storage
  config: Config
  clock: ManualClock
  /** JSON log lines the app wrote. */
  logs: Record<string, unknown>[]
  /** Creates an API key in this app's database and returns the secret. */
  createKey(options?: { name?: string; expiresInMs?: number; environment?: Config['environment']; scopes?: readonly Scope[] }): Promise<string>
  /** `app.inject` with `Authorization: Bearer <key>` added. */
  request(key: string, options: InjectOptions): Promise<LightMyRequestResponse>
  close(): Promise<void>
}

export interface TestAppOptions {
  /** Configuration variables on top of the test database and LOG_LEVEL=info. */
  env?: Record<string, string>
  clock?: ManualClock
  /** Wraps the migrated storage, to make it fail on purpose. */
  storage?: (storage: Storage) => Storage
  /** The registry the app counts into, for tests that read it. */
  metrics?: Metrics
}

/** Builds the real app on a new, migrated database of `engine`, with a manual clock. */
export async function buildTestApp(engine: Engine, options: TestAppOptions = {}): Promise<TestApp> {
  const dir = tempDir()
  const database = await createTestDatabase(engine, dir)
  // An app built here shares its event loop with the test runner, whose own work would count as the
  // app's load: shedding on event-loop delay is off unless a test turns it on (test/http/overload.test.ts).
  const config = loadConfig({ ...database.env, LOG_LEVEL: 'info', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', ...options.env }, dir)
  const clock = options.clock ?? new ManualClock()
  const logs: Record<string, unknown>[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>)
      }
      callback()
    },
  })
  const logger = createLogger(config, sink)
  const opened = await openStorage(config.database, 'DATABASE_URL', logger)
  await opened.migrate()
  const storage = options.storage?.(opened) ?? opened
  const app = await buildApp({ config, storage, clock, logger, metrics: options.metrics })
  await app.ready()

  return {
    app,
    storage,
    config,
    clock,
    logs,
    async createKey({ name = 'test', expiresInMs, environment = config.environment, scopes } = {}) {
      const service = createApiKeysService({ apiKeys: opened.apiKeys, clock, environment })
      return (await service.create({ name, expiresInMs, scopes })).secret
    },
    request(key, injectOptions) {
      return app.inject({
        ...injectOptions,
        headers: { authorization: `Bearer ${key}`, ...injectOptions.headers },
      })
    },
    async close() {
      await app.close()
      await opened.close()
      await database.drop()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** What `useTestApp` gives a suite: read `testApp` and `key` inside its tests and hooks, never in the describe body. */
export interface TestAppFixture {
  /** The suite's app, built by its `before` hook. */
  readonly testApp: TestApp
  /** An API key of the suite's app, created by the same hook. */
  readonly key: string
}

/**
 * The fixture of a suite that shares one app: registers, in the calling describe, a `before` hook
 * that builds the app on `engine` (with `options`) and creates a key, and an `after` hook that
 * closes it. A suite's own `before` hooks, registered after this call, run after it and may seed
 * the app through the fixture.
 */
export function useTestApp(engine: Engine, options: TestAppOptions = {}): TestAppFixture {
  let testApp: TestApp | undefined
  let key: string | undefined
  before(async () => {
    testApp = await buildTestApp(engine, options)
    key = await testApp.createKey()
  })
  after(() => testApp?.close())
  const ready = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) {
      throw new Error(`useTestApp: ${name} was read before the suite's before hook built it; read it inside a test or a hook`)
    }
    return value
  }
  return {
    get testApp() {
      return ready(testApp, 'testApp')
    },
    get key() {
      return ready(key, 'key')
    },
  }
}

/** GETs /v1/pets?limit=100, asserts 200, and returns the body as sent: every pet while a suite keeps under 100. */
export async function listPetsText(testApp: TestApp, key: string): Promise<string> {
  const response = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })
  assert.equal(response.statusCode, 200, response.body)
  return response.body
}

/** POSTs a raw JSON text (not a JS object: the tests control every byte) to /v1/pets. */
export function postPet(testApp: TestApp, key: string, body: string): Promise<LightMyRequestResponse> {
  return testApp.request(key, {
    method: 'POST',
    url: '/v1/pets',
    headers: { 'content-type': 'application/json' },
    payload: body,
  })
}

/** Asserts the exact error shape and returns the body. */
export function errorBody(response: LightMyRequestResponse): { code: string; message: string; status: number } {
  const body = JSON.parse(response.body) as { code: string; message: string; status: number }
  if (!/^application\/json/.test(String(response.headers['content-type']))) {
    throw new Error(`error content-type is ${String(response.headers['content-type'])}`)
  }
  const keys = Object.keys(body).sort().join(',')
  if (keys !== 'code,message,status') throw new Error(`error body has keys ${keys}: ${response.body}`)
  if (body.status !== response.statusCode) throw new Error(`body status ${body.status} != ${response.statusCode}`)
  if (typeof body.code !== 'string' || typeof body.message !== 'string' || body.message === '') {
    throw new Error(`malformed error body ${response.body}`)
  }
  return body
}

/** The root of the repository and the bin in it, for spawning the CLI as a user would. */
export { BIN, ROOT } from '../scripts/petstore-process.js'
