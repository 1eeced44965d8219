import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type TestContext, after, before, describe, it } from 'node:test'
import pg from 'pg'
import { type Pooler, type PostgresNode, startPgBouncer, startPrimary, startStandby } from '../scripts/pg-cluster.js'
import { createKey, errorShape } from '../scripts/petstore-process.js'
import type { Engine } from './helper.js'
import { type EmbeddedServer, POOLER_SKIP, TEST_POSTGRES_URL, createPostgresDatabase, startEmbeddedPostgres } from './postgres.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from './processes.js'

/*
 * Every kind of request the service serves, under load, against every fault it promises to survive,
 * on the engines the fault exists on, in real processes with a database of this file's own (the
 * shared test server is never stopped). What must hold in every cell:
 * - the process never exits by itself;
 * - every answer is a status its operation documents, errors in the one error shape, never a 500;
 * - a connection the service accepted is answered, never reset (a dead process's excepted);
 * - nothing acknowledged is lost or changed;
 * - a create retried with its Idempotency-Key gets the one pet within seconds of the service being back.
 */

after(cleanupProcesses)

type Kind =
  | 'list'
  | 'get'
  | 'create'
  | 'keyed create'
  | 'HEAD list'
  | 'HEAD get'
  | 'conditional list'
  | 'conditional get'
  | 'conditional HEAD list'
  | 'conditional HEAD get'
const KINDS = Object.keys({
  list: 0,
  get: 0,
  create: 0,
  'keyed create': 0,
  'HEAD list': 0,
  'HEAD get': 0,
  'conditional list': 0,
  'conditional get': 0,
  'conditional HEAD list': 0,
  'conditional HEAD get': 0,
} satisfies Record<Kind, 0>) as Kind[]

/** The statuses each kind of request may get while the database or the process is in trouble. */
const DOCUMENTED: Record<Kind, readonly number[]> = {
  list: [200, 503],
  get: [200, 503],
  create: [201, 503],
  'keyed create': [201, 409, 503],
  'HEAD list': [200, 503],
  'HEAD get': [200, 503],
  'conditional list': [200, 304, 503],
  'conditional get': [200, 304, 503],
  'conditional HEAD list': [200, 304, 503],
  'conditional HEAD get': [200, 304, 503],
}

type Fault =
  | 'pooler paused past the limits'
  | 'switchover'
  | 'failover'
  | 'standby not yet promoted'
  | 'primary fenced read-only'
  | 'database stopped'
  | 'database crashed'
  | 'backend terminated'
  | 'instance SIGKILLed'
  | 'SIGTERM under keep-alive load'
  | 'disk full'

const FAULTS: Record<Engine, readonly Fault[]> = {
  postgres: ['database stopped', 'database crashed', 'backend terminated', 'instance SIGKILLed', 'SIGTERM under keep-alive load'],
  sqlite: ['instance SIGKILLed', 'SIGTERM under keep-alive load', 'disk full'],
  // PostgreSQL as fleets run it: a PgBouncer in transaction mode in front of a primary and its standby.
  pgbouncer: ['switchover', 'pooler paused past the limits', 'failover', 'standby not yet promoted', 'primary fenced read-only'],
}

/** Faults of a server that cannot write for a while: reads must keep working through them. */
const READ_ONLY = new Set<Fault>(['standby not yet promoted', 'primary fenced read-only'])

/** Kinds that only read. */
const READS = new Set<Kind>(KINDS.filter((kind) => !kind.includes('create')))

/** Faults that end the process on purpose: it is started again, and its connections may break meanwhile. */
const ENDS_PROCESS = new Set<Fault>(['instance SIGKILLed', 'SIGTERM under keep-alive load'])

const LOOPS = 8
const LOAD_BEFORE_MS = 1_500
const FAULT_MS = 2_500
const LOAD_AFTER_MS = 1_500
/** How soon after the service is back a retry with the same Idempotency-Key must get its pet. */
const RETRY_WITHIN_MS = 10_000
/**
 * Longer than the service waits for a query (15 s) after it waited for a connection of its pool (5 s):
 * requests held at a paused pooler must have had their answer by then.
 */
const ANSWER_WITHIN_MS = 25_000
/** A pooler paused longer than the service waits for a query. */
const PAUSED_PAST_LIMITS_MS = 17_000

interface Keyed {
  key: string
  body: string
  /** The 201 body, once one came. */
  answer?: string
}

interface Cell {
  engine: Engine
  fault: Fault
  /** The instance that loop `loop` (or the checks, without one) sends to. */
  base: (loop?: number) => string
  apiKey: string
  answers: Map<string, number>
  problems: string[]
  acknowledged: Map<string, string>
  keyed: Keyed[]
  /** Connection errors seen, with when (relative to the fault) and why they are allowed or not. */
  connectionErrors: string[]
  etags: Map<string, string>
  knownId: string
  agent: http.Agent
  faultStartedAt?: number
  /** Set when the fault ends (the pooler resumed or repointed, the server writable again, the process back). */
  faultEndedAt?: number
  /** How long after the fault ended each instance acknowledged its first create, by its base URL. */
  createdAgainAfterMs: Map<string, number>
  /** The longest a request waited for its answer. */
  slowestMs: number
}


/**
 * One request over the cell's kept-alive connections (node:http, one connection per loop at most, so
 * that a new connection is opened only when the service closed one), with what a failure was on.
 */
function request(
  cell: Cell,
  loop: number,
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const sent = http.request(`${cell.base(loop)}${url}`, { method, headers, agent: cell.agent, timeout: ANSWER_WITHIN_MS }, (response) => {
      let text = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }))
      response.on('error', (error) => reject(Object.assign(error, { reused: sent.reusedSocket })))
    })
    sent.on('timeout', () => sent.destroy(new Error(`no answer within ${ANSWER_WITHIN_MS} ms`)))
    sent.on('error', (error) => reject(Object.assign(error, { reused: sent.reusedSocket })))
    sent.end(body)
  })
}

/** One request of `kind`, checked against what its operation documents; records what it acknowledged. */
async function send(cell: Cell, kind: Kind, loop: number, n: number, allowConnectionErrors: () => boolean): Promise<void> {
  const headers: Record<string, string> = { authorization: `Bearer ${cell.apiKey}` }
  let method = 'GET'
  let url = '/v1/pets?limit=5'
  let body: string | undefined
  let keyed: Keyed | undefined
  if (kind.endsWith('get')) url = `/v1/pets/${cell.knownId}`
  if (kind.includes('HEAD')) method = 'HEAD'
  if (kind.startsWith('conditional')) headers['if-none-match'] = cell.etags.get(url) ?? '"none"'
  if (kind === 'create' || kind === 'keyed create') {
    method = 'POST'
    url = '/v1/pets'
    headers['content-type'] = 'application/json'
    body = JSON.stringify({ name: `${cell.fault} ${kind} ${loop}-${n}`, categoryId: loop + 1 })
    if (kind === 'keyed create') {
      keyed = { key: randomUUID(), body }
      cell.keyed.push(keyed)
      headers['idempotency-key'] = keyed.key
    }
  }
  let answer: { status: number; headers: http.IncomingHttpHeaders; text: string }
  const sentAt = Date.now()
  try {
    answer = await request(cell, loop, method, url, headers, body)
    cell.slowestMs = Math.max(cell.slowestMs, Date.now() - sentAt)
  } catch (error) {
    const { code, reused } = error as { code?: string; reused?: boolean }
    const what = `${kind}: ${code ?? String(error)}${reused === true ? ' on a kept-alive connection' : ' on a new connection'}`
    // A new connection refused while no process listens never reached the service.
    if (code === 'ECONNREFUSED') return
    cell.connectionErrors.push(what)
    if (!allowConnectionErrors()) cell.problems.push(`connection error outside a process's end: ${what}`)
    return
  }
  const { status, text } = answer
  cell.answers.set(`${kind} ${status}`, (cell.answers.get(`${kind} ${status}`) ?? 0) + 1)
  if (!DOCUMENTED[kind].includes(status)) cell.problems.push(`${kind}: undocumented ${status} ${text.slice(0, 200)}`)
  if (method === 'HEAD' && text !== '') cell.problems.push(`${kind}: a body on HEAD`)
  if (status >= 400 && method !== 'HEAD') {
    const wrong = errorShape(status, text)
    if (wrong !== undefined) cell.problems.push(`${kind} ${status}: ${wrong}`)
  }
  if (status >= 500 && answer.headers['retry-after'] === undefined) cell.problems.push(`${kind} ${status} without Retry-After`)
  const etag = answer.headers.etag ?? null
  if (status === 200 && etag !== null) cell.etags.set(url, etag)
  if (status === 201) {
    if (cell.faultEndedAt !== undefined && !cell.createdAgainAfterMs.has(cell.base(loop))) {
      cell.createdAgainAfterMs.set(cell.base(loop), Date.now() - cell.faultEndedAt)
    }
    const pet = JSON.parse(text) as { id: number | string }
    cell.acknowledged.set(String(pet.id), text)
    if (keyed !== undefined) keyed.answer = text
  }
}

/** Every pet, id → body as getPet-shaped JSON, read page by page. */
async function allPets(cell: Cell): Promise<Map<string, string>> {
  const pets = new Map<string, string>()
  let next: string | undefined = `${cell.base()}/v1/pets?limit=100`
  while (next !== undefined) {
    const response: Response = await fetch(next, { headers: { authorization: `Bearer ${cell.apiKey}` } })
    assert.equal(response.status, 200, `listing all pets: ${response.status}`)
    for (const pet of (await response.json()) as { id: number }[]) pets.set(String(pet.id), JSON.stringify(pet))
    next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
  }
  return pets
}

/** Sends `request` until it is answered 201, or fails after RETRY_WITHIN_MS. */
async function retryUntilCreated(cell: Cell, keyed: Keyed): Promise<{ body: string; replayed: boolean }> {
  const deadline = Date.now() + RETRY_WITHIN_MS
  let last = ''
  for (;;) {
    try {
      const response = await fetch(`${cell.base()}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${cell.apiKey}`, 'content-type': 'application/json', 'idempotency-key': keyed.key },
        body: keyed.body,
      })
      const text = await response.text()
      if (response.status === 201) return { body: text, replayed: response.headers.get('idempotent-replayed') === 'true' }
      last = `${response.status} ${text}`
    } catch (error) {
      last = String(error)
    }
    if (Date.now() > deadline) assert.fail(`a retry with Idempotency-Key ${keyed.key} got no pet within ${RETRY_WITHIN_MS} ms: ${last}`)
    await sleep(100)
  }
}

const skipPostgres = TEST_POSTGRES_URL === undefined || TEST_POSTGRES_URL === '' ? 'PETSTORE_TEST_DATABASE_URL is not set' : false

/** A tmpfs of `size` for the full-disk cell, or why there cannot be one here. */
function mountSmallDisk(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' })
    return undefined
  } catch (error) {
    return `a tmpfs cannot be mounted here (${(error as Error).message.split('\n')[0]}): the full-disk cell needs root`
  }
}

/**
 * A primary, a streaming standby of it (synchronous for `failover`, so that nothing acknowledged is
 * lost with the primary), and a PgBouncer in transaction mode in front of the primary, which tries a
 * failed server login again after 1 s (PgBouncer's default is 15: docs/operations.md).
 */
interface PooledCluster {
  primary: PostgresNode
  standby: PostgresNode
  pooler: Pooler
}

async function startPooledCluster(fault: Fault): Promise<PooledCluster> {
  const primary = await startPrimary()
  await primary.query('CREATE DATABASE petstore')
  const standby = await startStandby(primary, { synchronous: fault === 'failover' })
  const pooler = await startPgBouncer(primary, { poolMode: 'transaction', poolSize: 10, serverLoginRetry: 1 })
  return { primary, standby, pooler }
}

async function destroyPooledCluster(cluster: PooledCluster | undefined): Promise<void> {
  await cluster?.pooler.destroy()
  await cluster?.standby.destroy()
  await cluster?.primary.destroy()
}

const SKIP: Record<Engine, string | false> = { sqlite: false, postgres: skipPostgres, pgbouncer: POOLER_SKIP }

for (const engine of ['sqlite', 'postgres', 'pgbouncer'] as const) {
  describe(`the fault matrix on ${engine}`, { skip: SKIP[engine], timeout: 480_000 }, () => {
    let database: EmbeddedServer | undefined

    before(async () => {
      if (engine === 'postgres') database = await startEmbeddedPostgres()
    })
    after(async () => {
      await database?.destroy()
    })

    for (const fault of FAULTS[engine]) {
      it(`${fault}: every kind of request (${KINDS.join(', ')}) gets a documented answer, nothing acknowledged is lost, keyed retries get their one pet`, async (t) => {
        const dir = trackedTempDir('petstore-fault-')
        let env: Record<string, string>
        let unmount: (() => void) | undefined
        let cluster: PooledCluster | undefined
        if (engine === 'pgbouncer') {
          cluster = await startPooledCluster(fault)
          env = { DATABASE_URL: cluster.pooler.url('petstore'), DATABASE_PREPARED_STATEMENTS: 'false', DATABASE_POOL_SIZE: '4' }
        } else if (engine === 'postgres') {
          assert.ok(database !== undefined)
          env = { DATABASE_URL: (await createPostgresDatabase(database.url)).url, DATABASE_POOL_SIZE: '4' }
        } else if (fault === 'disk full') {
          const disk = path.join(dir, 'disk')
          fs.mkdirSync(disk)
          const cannot = mountSmallDisk(disk, '16m')
          if (cannot !== undefined) return t.skip(cannot)
          unmount = () => execFileSync('umount', ['-l', disk])
          env = { DATABASE_URL: `sqlite://${path.join(disk, 'petstore.db')}` }
        } else {
          env = { DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}` }
        }
        env = { ...env, RATE_LIMIT_PER_KEY: '0' }
        try {
          await runCell(engine, fault, env, dir, database, cluster, t)
        } finally {
          unmount?.()
          await destroyPooledCluster(cluster)
        }
      })
    }
  })
}

async function runCell(
  engine: Engine,
  fault: Fault,
  env: Record<string, string>,
  dir: string,
  database: EmbeddedServer | undefined,
  cluster: PooledCluster | undefined,
  t: TestContext,
): Promise<void> {
  await runCli(['migrate'], env, dir, { rejectOnFailure: true, timeoutMs: 30_000 })
  const apiKey = await createKey(env, 'fault-matrix')
  let service: ServerProcess = await startServer(env, dir)
  // Behind the pooler, two instances, as a fleet has: each must come through on its own.
  const others: ServerProcess[] = engine === 'pgbouncer' ? [await startServer(env, dir)] : []
  const seeded = await fetch(`${service.baseUrl}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: '{"name":"Seed","categoryId":1}',
  })
  assert.equal(seeded.status, 201)
  const seed = await seeded.text()
  const cell: Cell = {
    engine,
    fault,
    base: (loop = 0) => [service, ...others][loop % (1 + others.length)]?.baseUrl ?? service.baseUrl,
    apiKey,
    answers: new Map(),
    problems: [],
    acknowledged: new Map([[String((JSON.parse(seed) as { id: number }).id), seed]]),
    keyed: [],
    connectionErrors: [],
    etags: new Map(),
    knownId: String((JSON.parse(seed) as { id: number }).id),
    agent: new http.Agent({ keepAlive: true, maxSockets: LOOPS }),
    slowestMs: 0,
    createdAgainAfterMs: new Map(),
  }

  let processEnding = false
  let running = true
  const loops = Array.from({ length: LOOPS }, async (_, loop) => {
    for (let n = 0; running; n++) await send(cell, KINDS[(loop + n) % KINDS.length] ?? 'list', loop, n, () => processEnding && fault === 'instance SIGKILLed')
  })

  // What the fault does, and how the service comes back from it.
  let heal: () => Promise<void> = async () => {}
  let healed = false
  // The loops stop, and the fault heals, however the cell ends: a failed assertion must not leave
  // loops running or the database stopped for the next cell.
  try {
    await sleep(LOAD_BEFORE_MS)
    let filler = ''
    cell.faultStartedAt = Date.now()
    const ended = () => (cell.faultEndedAt = Date.now())
    switch (fault) {
      case 'switchover': {
        // As an operator does it: requests wait at the pooler while the standby takes over.
        assert.ok(cluster !== undefined)
        await cluster.pooler.admin('PAUSE')
        await cluster.primary.stop('fast')
        await cluster.standby.promote()
        await cluster.pooler.repoint(cluster.standby)
        await cluster.pooler.admin('RESUME')
        ended()
        break
      }
      case 'pooler paused past the limits': {
        // A pause nobody ended in time: requests held past the service's limits are answered 503.
        assert.ok(cluster !== undefined)
        const { pooler } = cluster
        await pooler.admin('PAUSE')
        await sleep(PAUSED_PAST_LIMITS_MS)
        heal = async () => {
          await pooler.admin('RESUME')
          ended()
        }
        break
      }
      case 'failover':
        // The primary dies with transactions in flight; its synchronous standby takes over.
        assert.ok(cluster !== undefined)
        await cluster.primary.stop('immediate')
        await cluster.standby.promote()
        await cluster.pooler.repoint(cluster.standby)
        ended()
        break
      case 'standby not yet promoted': {
        assert.ok(cluster !== undefined)
        const { pooler, primary, standby } = cluster
        await pooler.repoint(standby)
        heal = async () => {
          await pooler.repoint(primary)
          ended()
        }
        break
      }
      case 'primary fenced read-only': {
        assert.ok(cluster !== undefined)
        const { primary } = cluster
        await primary.query('ALTER SYSTEM SET default_transaction_read_only = on')
        await primary.query('SELECT pg_reload_conf()')
        heal = async () => {
          await primary.query('ALTER SYSTEM RESET default_transaction_read_only')
          await primary.query('SELECT pg_reload_conf()')
          ended()
        }
        break
      }
      case 'database stopped':
        await database?.stop()
        heal = async () => database?.start()
        break
      case 'database crashed': {
        // A backend killed by a signal makes the postmaster end every session and recover, as after a crash.
        const client = new pg.Client({ connectionString: env.DATABASE_URL })
        await client.connect()
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        client.on('error', () => {})
        process.kill(rows[0]?.pid ?? 0, 'SIGKILL')
        break
      }
      case 'backend terminated': {
        const client = new pg.Client({ connectionString: env.DATABASE_URL })
        await client.connect()
        try {
          for (let i = 0; i < 5; i++) {
            await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')
            await sleep(FAULT_MS / 5)
          }
        } finally {
          await client.end()
        }
        break
      }
      case 'instance SIGKILLed':
      case 'SIGTERM under keep-alive load': {
        processEnding = true
        const signal = fault === 'instance SIGKILLed' ? 'SIGKILL' : 'SIGTERM'
        const exit = await stopServer(service, signal, 15_000)
        if (signal === 'SIGTERM') assert.equal(exit.code, 0, `exit after SIGTERM: ${service.output()}`)
        heal = async () => {
          service = await startServer(env, dir)
          processEnding = false
        }
        break
      }
      case 'disk full': {
        const disk = path.dirname(env.DATABASE_URL?.slice('sqlite://'.length) ?? '')
        filler = path.join(disk, 'filler')
        try {
          execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' })
        } catch {
          // dd stops with "No space left on device": that is the point.
        }
        heal = async () => fs.rmSync(filler, { force: true })
        break
      }
    }
    // CLI commands that open the database meet the fault too: a clear refusal or their usual answer, never a crash.
    const listed = await runCli(['keys', 'list'], env, dir, { timeoutMs: 30_000 })
    if (listed.code !== 0) {
      assert.equal(listed.code, 1, `keys list during ${fault}: exit ${listed.code}\n${listed.stderr}`)
      assert.match(listed.stderr, /^petstore: /, `keys list during ${fault}`)
      assert.doesNotMatch(listed.stderr, /\n\s+at /, `keys list during ${fault} printed a stack trace`)
    }
    await sleep(FAULT_MS)
    if (!ENDS_PROCESS.has(fault)) assert.equal(service.child.exitCode, null, `the process exited during ${fault}:\n${service.output()}`)
    healed = true
    await heal()
    await sleep(LOAD_AFTER_MS)
  } finally {
    running = false
    await Promise.all(loops)
    if (!healed) await heal()
  }

  // Every keyed create that got no 201 is retried with its key: it must get its one pet, soon.
  for (const keyed of cell.keyed) {
    const retried = await retryUntilCreated(cell, keyed)
    if (keyed.answer !== undefined) {
      assert.equal(retried.body, keyed.answer, 'a retry of an acknowledged keyed create got another answer')
      assert.ok(retried.replayed)
    }
    cell.acknowledged.set(String((JSON.parse(retried.body) as { id: number }).id), retried.body)
  }

  const stored = await allPets(cell)
  for (const [id, body] of cell.acknowledged) {
    assert.equal(stored.get(id), body, `acknowledged pet ${id} is lost or changed after ${fault}`)
  }
  const names = [...stored.values()].map((body) => (JSON.parse(body) as { name: string }).name)
  for (const keyed of cell.keyed) {
    const name = (JSON.parse(keyed.body) as { name: string }).name
    assert.equal(names.filter((stored) => stored === name).length, 1, `Idempotency-Key ${keyed.key} made other than one pet`)
  }
  const listedAfter = await runCli(['keys', 'list'], env, dir, { timeoutMs: 30_000 })
  assert.equal(listedAfter.code, 0, `keys list after ${fault}: ${listedAfter.stderr}`)

  for (const instance of [service, ...others]) {
    assert.equal(instance.child.exitCode, null, `the process exited after ${fault}:\n${instance.output()}`)
    assert.doesNotMatch(instance.output(), /fatal error|uncaught|unhandled/i, 'the log shows a crash')
    await stopServer(instance)
  }
  cell.agent.destroy()
  assert.deepEqual(cell.problems, [], `${fault} on ${engine}: answers ${JSON.stringify([...cell.answers])}`)
  if (engine === 'pgbouncer') {
    const unavailable = [...cell.answers].filter(([what]) => what.endsWith(' 503'))
    t.diagnostic(
      `${fault}: ${(cell.faultEndedAt ?? 0) - (cell.faultStartedAt ?? 0)} ms from its start to its end; each instance's first create ${JSON.stringify([...cell.createdAgainAfterMs.values()])} ms after the fault ended, the slowest answer ${cell.slowestMs} ms; ` +
        `503s ${JSON.stringify(unavailable)}; answers ${JSON.stringify([...cell.answers])}`,
    )
    for (const instance of [service, ...others]) {
      const after = cell.createdAgainAfterMs.get(instance.baseUrl)
      assert.ok(after !== undefined && after <= RETRY_WITHIN_MS, `${instance.baseUrl} created nothing within ${RETRY_WITHIN_MS} ms after ${fault}`)
    }
    // The pause holds requests at the pooler: they wait, within the service's limits, and complete.
    if (fault === 'switchover') assert.deepEqual(unavailable, [], 'a request failed during a paused switchover')
    if (READ_ONLY.has(fault)) {
      assert.deepEqual(unavailable.filter(([what]) => READS.has(what.slice(0, -' 503'.length) as Kind)), [], `a read failed on a ${fault}`)
    }
  }
  // The fault really was met: some request failed, or the process really ended.
  const failures = [...cell.answers].filter(([what]) => / (503|409)$/.test(what)).length + cell.connectionErrors.length
  // A paused switchover is felt as a wait, not a failure: the pooler now serves from the promoted standby.
  if (fault !== 'SIGTERM under keep-alive load' && fault !== 'switchover') assert.ok(failures > 0 || ENDS_PROCESS.has(fault), `${fault} was never felt: ${JSON.stringify([...cell.answers])}`)
}
