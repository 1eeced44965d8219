import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import type net from 'node:net'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type TestContext, after, before, describe, it } from 'node:test'
import pg from 'pg'
import { type Pooler, type PoolerTarget, type PostgresNode, type ReplicaCluster, follow, startPgBouncer, startPrimary, startReplicaCluster, startStandby } from '../scripts/pg-cluster.js'
import { createKey, errorShape, freePort } from '../scripts/petstore-process.js'
import { type Certificate, HALF_CLIENT_HELLO, makeCertificate, opensslSkip, servedFingerprint, stalledHandshake } from './certificates.js'
import type { Engine } from './helper.js'
import { type EmbeddedServer, POOLER_SKIP, TEST_POSTGRES_URL, createPostgresDatabase, startEmbeddedPostgres } from './postgres.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir, until, within } from './processes.js'

/*
 * Every kind of request the service serves, under load, against every fault it promises to survive,
 * on the engines the fault exists on, in real processes with a database of this file's own (the
 * shared test server is never stopped). What must hold in every cell:
 * - the process never exits by itself;
 * - every answer is a status its operation documents, errors in the one error shape, never a 500;
 * - a connection the service accepted is answered, never reset (a dead process's excepted);
 * - nothing acknowledged is lost or changed;
 * - a create retried with its Idempotency-Key gets the one pet within seconds of the service being back;
 * - every stop by SIGTERM, the cell's own and the one that ends it, exits 0 within STOP_WITHIN_MS.
 * With standbys (DATABASE_REPLICA_URLS), also:
 * - every pet answered 201, asked of the other instance at once, is found: never a 404;
 * - every walk of the pages holds every pet acknowledged before it began, in order, once;
 * - each instance read pets and pages on its standbys.
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
  | 'SIGTERM to the process group'
  | 'log reader gone'
  | 'half TLS handshakes'
  | 'certificate folder swapped'
  | 'disk full'
  | 'database file moved away and back'
  | 'standby paused'
  | 'standby stopped'
  | 'primary stopped'
  | 'failover onto a standby'

/**
 * `standbys`: a primary, a synchronous standby and one that replays each commit REPLICA_APPLY_DELAY_MS
 * late, both in DATABASE_REPLICA_URLS; `standbys behind PgBouncer`: the same, each server behind a
 * PgBouncer in transaction mode of its own (docs/decisions/0023-read-replicas.md).
 */
type MatrixEngine = Engine | 'standbys' | 'standbys behind PgBouncer'
const REPLICA_ENGINES = new Set<MatrixEngine>(['standbys', 'standbys behind PgBouncer'])

const FAULTS: Record<MatrixEngine, readonly Fault[]> = {
  postgres: ['database stopped', 'database crashed', 'backend terminated', 'instance SIGKILLed', 'SIGTERM under keep-alive load'],
  sqlite: [
    'instance SIGKILLed',
    'SIGTERM under keep-alive load',
    // Faults of the process, its signals, its log pipe and its TLS listener: nothing in them touches the
    // database, so they run on the engine that costs the least to set up.
    'SIGTERM to the process group',
    'log reader gone',
    'half TLS handshakes',
    'certificate folder swapped',
    'disk full',
    'database file moved away and back',
  ],
  // PostgreSQL as fleets run it: a PgBouncer in transaction mode in front of a primary and its standby.
  pgbouncer: ['switchover', 'pooler paused past the limits', 'failover', 'standby not yet promoted', 'primary fenced read-only'],
  standbys: ['standby paused', 'standby stopped', 'primary stopped'],
  // A failover needs the primary's address repointed, which the pooler does.
  'standbys behind PgBouncer': ['standby stopped', 'primary stopped', 'failover onto a standby'],
}

/** Faults whose reads are served throughout from the servers left: no read may fail, not even with a 503. */
const READS_SERVED = new Set<Fault>(['standby not yet promoted', 'primary fenced read-only', 'standby paused', 'standby stopped', 'primary stopped', 'failover onto a standby'])

/** Longer than DATABASE_REPLICA_MAX_LAG_MS (its default, 1 s): that standby never serves under writes. */
const REPLICA_APPLY_DELAY_MS = 2_000

/** Kinds that only read. */
const READS = new Set<Kind>(KINDS.filter((kind) => !kind.includes('create')))

/** Faults that end the process on purpose: it is started again, and its connections may break meanwhile. */
const ENDS_PROCESS = new Set<Fault>(['instance SIGKILLed', 'SIGTERM under keep-alive load', 'SIGTERM to the process group'])

/**
 * Faults the service serves through as if nothing happened: no request may fail, not even with a 503. A
 * paused switchover is felt as a wait, not a failure: the pooler then serves from the promoted standby.
 */
const NEVER_FELT = new Set<Fault>(['switchover', 'log reader gone', 'half TLS handshakes', 'certificate folder swapped', 'standby paused', 'standby stopped'])

/** Faults of a service serving HTTPS itself. */
const TLS_FAULTS = new Set<Fault>(['half TLS handshakes', 'certificate folder swapped'])

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
/** Shorter than the default (10 s), so that a stop that hangs fails the matrix soon. */
const SHUTDOWN_TIMEOUT_MS = 3_000
/**
 * The bound on a stop (issue 30): the service exits 1 once the drain (SHUTDOWN_DRAIN_MS, left at its
 * 1 s) and SHUTDOWN_TIMEOUT_MS have passed, so a clean stop ends within this.
 */
const STOP_WITHIN_MS = SHUTDOWN_TIMEOUT_MS + 1_000
/** Stalled TLS handshakes held open during 'half TLS handshakes'. */
const STALLED_HANDSHAKES = 20
/** How soon new connections must get a certificate put in place of the old (the reload polls every second). */
const CERTIFICATE_SERVED_WITHIN_MS = 5_000

interface Keyed {
  key: string
  body: string
  /** The 201 body, once one came. */
  answer?: string
}

interface Cell {
  engine: MatrixEngine
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
  /** Keeps connections alive, and trusts the cell's CA when it serves HTTPS. */
  agent: http.Agent
  faultStartedAt?: number
  /**
   * True from the moment the database file is renamed away until it is renamed back: a create sent and
   * answered while it is may not be acknowledged. Both renames happen in this process, between two turns
   * of the loops, so a create sent while it is true reached the service after the move; a time read from
   * the clock cannot tell a create sent in the move's millisecond, before it, from one sent after it.
   */
  fileAway?: boolean
  /** Set when the fault ends (the pooler resumed or repointed, the server writable again, the process back). */
  faultEndedAt?: number
  /** How long after the fault ended each instance acknowledged its first create, by its base URL. */
  createdAgainAfterMs: Map<string, number>
  /** The longest a request waited for its answer. */
  slowestMs: number
  /** With standbys: acknowledged pets asked of the other instance at once. */
  gotAfterCreate: number
}


interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
}

/**
 * One request over `agent`'s kept-alive connections (node:http or node:https, one connection per loop at
 * most, so that a new connection is opened only when the service closed one), with what a failure was on.
 */
function request(agent: http.Agent, url: string, { method = 'GET', headers, body }: { method?: string; headers: Record<string, string>; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sent = (url.startsWith('https:') ? https : http).request(url, { method, headers, agent, timeout: ANSWER_WITHIN_MS }, (response) => {
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
  let answer: Answer
  const sentAt = Date.now()
  const sentWhileAway = cell.fileAway === true
  try {
    answer = await request(cell.agent, `${cell.base(loop)}${url}`, { method, headers, body })
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
    // Sent after the move and answered before the move back, it was committed into the file while away from
    // its path. One answered after the move back may have been committed there, where it is safe.
    if (sentWhileAway && cell.fileAway === true) cell.problems.push(`${kind}: a create sent after the file moved was answered 201 before it was back`)
    // Every key sent here is new: an answer replayed for it would be another request's.
    if (keyed !== undefined && answer.headers['idempotent-replayed'] !== undefined) cell.problems.push(`${kind}: a new key answered as a replay`)
    if (cell.faultEndedAt !== undefined && !cell.createdAgainAfterMs.has(cell.base(loop))) {
      cell.createdAgainAfterMs.set(cell.base(loop), Date.now() - cell.faultEndedAt)
    }
    const pet = JSON.parse(text) as { id: number | string }
    cell.acknowledged.set(String(pet.id), text)
    if (keyed !== undefined) keyed.answer = text
    if (REPLICA_ENGINES.has(cell.engine)) await getAfterCreate(cell, String(pet.id), text, loop)
  }
}

/** With standbys: the pet a create acknowledged, asked of the other instance at once, is never a 404. */
async function getAfterCreate(cell: Cell, id: string, body: string, loop: number): Promise<void> {
  let answer: Answer
  try {
    answer = await request(cell.agent, `${cell.base(loop + 1)}/v1/pets/${id}`, { headers: { authorization: `Bearer ${cell.apiKey}` } })
  } catch (error) {
    cell.problems.push(`get after create of ${id}: ${String(error)}`)
    return
  }
  cell.gotAfterCreate++
  if (answer.status === 200 && answer.text !== body) cell.problems.push(`get after create of ${id}: another body ${answer.text}`)
  else if (answer.status !== 200) cell.problems.push(`get after create of ${id}: ${answer.status} ${answer.text.slice(0, 200)}`)
}

/**
 * With standbys: walks of every page, 7 pets a page, on the other instance, one after another while
 * `running()`: each must hold every pet acknowledged before it began, in ascending order, once.
 */
async function walkWhileRunning(cell: Cell, running: () => boolean): Promise<{ walks: number; cut: number }> {
  const done = { walks: 0, cut: 0 }
  while (running()) {
    const before = [...cell.acknowledged.keys()]
    const seen: bigint[] = []
    let next: string | undefined = '/v1/pets?limit=7'
    while (next !== undefined) {
      let page: Answer
      try {
        page = await request(cell.agent, `${cell.base(1)}${next}`, { headers: { authorization: `Bearer ${cell.apiKey}` } })
      } catch (error) {
        cell.problems.push(`walk: ${String(error)}`)
        break
      }
      if (page.status !== 200) {
        cell.problems.push(`walk: a page answered ${page.status} ${page.text.slice(0, 200)}`)
        break
      }
      for (const pet of JSON.parse(page.text) as { id: number }[]) seen.push(BigInt(pet.id))
      const link = /<([^>]+)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1]
      next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search
    }
    if (next !== undefined) {
      done.cut++
      continue
    }
    done.walks++
    if (seen.some((id, i) => i > 0 && id <= (seen[i - 1] ?? 0n))) cell.problems.push(`walk: ids not strictly ascending: ${seen.join(',')}`)
    const walked = new Set(seen.map(String))
    const skipped = before.filter((id) => !walked.has(id))
    if (skipped.length > 0) cell.problems.push(`walk: skipped pets acknowledged before it began: ${skipped.join(', ')}`)
  }
  return done
}

/** Every pet, id → body as getPet-shaped JSON, read page by page. */
async function allPets(cell: Cell): Promise<Map<string, string>> {
  const pets = new Map<string, string>()
  let next: string | undefined = '/v1/pets?limit=100'
  while (next !== undefined) {
    const page = await request(cell.agent, `${cell.base()}${next}`, { headers: { authorization: `Bearer ${cell.apiKey}` } })
    assert.equal(page.status, 200, `listing all pets: ${page.status}`)
    for (const pet of JSON.parse(page.text) as { id: number }[]) pets.set(String(pet.id), JSON.stringify(pet))
    // The link's origin is PUBLIC_BASE_URL, left at its default (http://localhost:PORT) whatever the scheme served.
    const link = /<([^>]+)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1]
    next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search
  }
  return pets
}

/** Sends `keyed` until it is answered 201, or fails after RETRY_WITHIN_MS. */
async function retryUntilCreated(cell: Cell, keyed: Keyed): Promise<{ body: string; replayed: boolean }> {
  const deadline = Date.now() + RETRY_WITHIN_MS
  let last: string
  for (;;) {
    try {
      const { status, headers, text } = await request(cell.agent, `${cell.base()}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${cell.apiKey}`, 'content-type': 'application/json', 'idempotency-key': keyed.key },
        body: keyed.body,
      })
      if (status === 201) return { body: text, replayed: headers['idempotent-replayed'] === 'true' }
      last = `${status} ${text}`
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
    // mode=0700: a tmpfs root is 1777 otherwise, a folder every user can write, which the service refuses.
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' })
    return undefined
  } catch (error) {
    return `a tmpfs cannot be mounted here (${(error as Error).message.split('\n')[0]}): the full-disk cell needs root`
  }
}

/**
 * A primary, a streaming standby of it (synchronous for `failover`, so that nothing acknowledged is
 * lost with the primary), and a PgBouncer in transaction mode in front of the primary, which tries a
 * failed server login again after 1 s (PgBouncer's default is 15: docs/deploying.md).
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

async function startMatrixReplicas(pooled: boolean): Promise<{ cluster: ReplicaCluster; env: Record<string, string> }> {
  const cluster = await startReplicaCluster({ applyDelayMs: REPLICA_APPLY_DELAY_MS, poolers: pooled, databases: ['petstore'] })
  return { cluster, env: { ...cluster.env('petstore', pooled ? 'poolers' : 'direct'), DATABASE_POOL_SIZE: '4' } }
}

/** The sum of the values `pattern` (its last group the value) matches in `instance`'s metrics. */
async function metricValue(metricsPorts: Map<string, number>, instance: ServerProcess, pattern: RegExp): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${metricsPorts.get(instance.baseUrl) ?? 0}/metrics`)
  const text = await response.text()
  return [...text.matchAll(pattern)].reduce((sum, match) => sum + Number(match.at(-1)), 0)
}

/**
 * Points `pooler` at `target` as docs/deploying.md tells operators to: between PAUSE and RESUME. A RELOAD that
 * changes the host while PgBouncer is logging a server connection in drops that login and counts it as failed,
 * and PgBouncer then refuses the pool's clients until server_login_retry has passed: reads included.
 */
async function repointPaused(pooler: Pooler, target: PoolerTarget): Promise<void> {
  await pooler.admin('PAUSE')
  try {
    await pooler.repoint(target)
  } finally {
    await pooler.admin('RESUME')
  }
}

/** The first line of each error the instances logged at level error: what a failed request met. */
function errorLines(instances: readonly ServerProcess[], most = 8): string {
  const lines = instances.flatMap((instance) => instance.output().split('\n').filter((line) => line.includes('"level":50')))
  // The errors a fault is expected to cause (creates refused while the primary is down) come by the hundred.
  const byError = new Map<string, string>()
  for (const line of lines) {
    const error = /"message":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? line
    if (!byError.has(error)) byError.set(error, line)
  }
  return [...byError.values()].slice(0, most).join('\n')
}

/** petstore_db_replica_usable of `standby` as `instance` sees it. */
function replicaUsable(metricsPorts: Map<string, number>, instance: ServerProcess, standby: PostgresNode): Promise<number> {
  return metricValue(metricsPorts, instance, new RegExp(`^petstore_db_replica_usable\\{replica="[^"]*:${standby.port}/petstore"\\} (\\d+)`, 'gm'))
}

const SKIP: Record<MatrixEngine, string | false> = {
  sqlite: false,
  postgres: skipPostgres,
  pgbouncer: POOLER_SKIP,
  standbys: POOLER_SKIP,
  'standbys behind PgBouncer': POOLER_SKIP,
}

/** The certificate folder of a cell serving HTTPS: `tls/cert.pem` and `tls/key.pem`, issued by a CA of the cell's own. */
interface CertificateFolder {
  ca: Certificate
  env: { TLS_CERT_FILE: string; TLS_KEY_FILE: string }
  /** `mv tls tls.old; mkdir tls; cp …` with a new certificate of the same CA, as a renewal script does it. */
  swap(name: string): Certificate
}

function certificateFolder(dir: string): CertificateFolder {
  const ca = makeCertificate(dir, 'ca')
  const folder = path.join(dir, 'tls')
  const env = { TLS_CERT_FILE: path.join(folder, 'cert.pem'), TLS_KEY_FILE: path.join(folder, 'key.pem') }
  const copyIn = (pair: Certificate) => {
    fs.mkdirSync(folder)
    fs.copyFileSync(pair.certFile, env.TLS_CERT_FILE)
    fs.copyFileSync(pair.keyFile, env.TLS_KEY_FILE)
    return pair
  }
  copyIn(makeCertificate(dir, 'first', { issuer: ca }))
  return {
    ca,
    env,
    swap(name) {
      const pair = makeCertificate(dir, name, { issuer: ca })
      fs.renameSync(folder, `${folder}.before-${name}`)
      return copyIn(pair)
    },
  }
}

/** The path of the SQLite file `env` names. */
const sqliteFile = (env: Record<string, string>): string => env.DATABASE_URL?.slice('sqlite://'.length) ?? ''

for (const engine of ['sqlite', 'postgres', 'pgbouncer', 'standbys', 'standbys behind PgBouncer'] as const) {
  describe(`the fault matrix on ${engine}`, { skip: SKIP[engine], timeout: 480_000 }, () => {
    let database: EmbeddedServer | undefined

    before(async () => {
      if (engine === 'postgres') database = await startEmbeddedPostgres()
    })
    after(async () => {
      await database?.destroy()
    })

    for (const fault of FAULTS[engine]) {
      it(`${fault}: every kind of request (${KINDS.join(', ')}) gets a documented answer, nothing acknowledged is lost, keyed retries get their one pet, every stop is bounded`, async (t) => {
        if (TLS_FAULTS.has(fault) && opensslSkip !== false) return t.skip(opensslSkip)
        const dir = trackedTempDir('petstore-fault-')
        let env: Record<string, string>
        let unmount: (() => void) | undefined
        let cluster: PooledCluster | undefined
        let replicaCluster: ReplicaCluster | undefined
        if (REPLICA_ENGINES.has(engine)) {
          const started = await startMatrixReplicas(engine === 'standbys behind PgBouncer')
          replicaCluster = started.cluster
          env = started.env
        } else if (engine === 'pgbouncer') {
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
        env = { ...env, RATE_LIMIT_PER_KEY: '0', SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) }
        // Every request logged, so that each one meets the pipe.
        if (fault === 'log reader gone') env.LOG_LEVEL = 'info'
        // Limits far beyond the cell's length: only the drain can close the stalled handshakes at the stop.
        if (fault === 'half TLS handshakes') env = { ...env, HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '60000' }
        const certificates = TLS_FAULTS.has(fault) ? certificateFolder(dir) : undefined
        if (certificates !== undefined) env = { ...env, ...certificates.env }
        try {
          await runCell({ engine, fault, env, dir, database, cluster, replicaCluster, certificates }, t)
        } finally {
          unmount?.()
          await destroyPooledCluster(cluster)
          await replicaCluster?.destroy()
        }
      })
    }
  })
}

interface Setup {
  engine: MatrixEngine
  fault: Fault
  env: Record<string, string>
  dir: string
  database: EmbeddedServer | undefined
  cluster: PooledCluster | undefined
  replicaCluster: ReplicaCluster | undefined
  certificates: CertificateFolder | undefined
}

/**
 * Stops `primary` as a crash does, with the service's creates in flight there whatever the load's timing:
 * a session of its own holds the pets table (SHARE, so reads go on) until one waits for it. Without it, a
 * pooler that holds new transactions while it retries the dead server (and the promoted one then serves
 * them) may hide a failover that met no transaction, which happened in CI.
 */
async function crashWithCreatesWaiting(primary: PostgresNode, env: Record<string, string>): Promise<void> {
  const holder = new pg.Client({ connectionString: primary.url(new URL(env.DATABASE_URL ?? '').pathname.slice(1)) })
  // The crash ends this session too.
  holder.on('error', () => {})
  await holder.connect()
  await holder.query('BEGIN')
  await holder.query('LOCK TABLE pets IN SHARE MODE')
  const waiting = async () => (await holder.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).rows[0]?.n ?? 0
  await until(async () => (await waiting()) > 0, 5_000, () => 'no create waited for the pets table')
  await primary.stop('immediate')
  await holder.end().catch(() => undefined)
}

/**
 * SIGTERM to `instance`, or, with `group`, to its process group, as systemd's KillMode=control-group
 * sends it; it must exit 0 within STOP_WITHIN_MS.
 */
async function stopWithinBound(instance: ServerProcess, fault: Fault, { group = false }: { group?: boolean } = {}): Promise<void> {
  const sentAt = performance.now()
  if (group) {
    // -0 is this test's own group; a positive pid is a group of the service's own, as it was started detached.
    assert.ok(Number.isInteger(instance.pid) && instance.pid > 0, `no pid to signal the group of: ${instance.pid}`)
    process.kill(-instance.pid, 'SIGTERM')
  } else {
    instance.child.kill('SIGTERM')
  }
  try {
    const exit = await within(instance.exited, STOP_WITHIN_MS + 5_000, () => `the process did not stop after ${fault}:\n${instance.output()}`)
    const tookMs = Math.round(performance.now() - sentAt)
    assert.deepEqual(exit, { code: 0, signal: null }, `the stop after ${fault}:\n${instance.output()}`)
    assert.ok(tookMs <= STOP_WITHIN_MS, `the stop after ${fault} took ${tookMs} ms, more than SHUTDOWN_TIMEOUT_MS + 1 s`)
  } finally {
    instance.child.kill('SIGKILL')
  }
}

async function runCell({ engine, fault, env, dir, database, cluster, replicaCluster, certificates }: Setup, t: TestContext): Promise<void> {
  // Migrates the database, as every command does: no `migrate` of its own to wait for.
  const apiKey = await createKey(env, 'fault-matrix')
  const ca = certificates === undefined ? undefined : [certificates.ca.pem]
  // With standbys, each instance's metrics are read: where its reads went.
  const metricsPorts = new Map<string, number>()
  const start = async () => {
    const metricsPort = replicaCluster === undefined ? undefined : await freePort()
    const started = await startServer(metricsPort === undefined ? env : { ...env, METRICS_PORT: String(metricsPort) }, dir, [], { detached: fault === 'SIGTERM to the process group', ca })
    if (metricsPort !== undefined) metricsPorts.set(started.baseUrl, metricsPort)
    return started
  }
  let service: ServerProcess = await start()
  // Behind the pooler, two instances, as a fleet has: each must come through on its own.
  const others: ServerProcess[] = engine === 'pgbouncer' || replicaCluster !== undefined ? [await start()] : []
  const agent = ca === undefined ? new http.Agent({ keepAlive: true, maxSockets: LOOPS }) : new https.Agent({ keepAlive: true, maxSockets: LOOPS, ca })
  const seeded = await request(agent, `${service.baseUrl}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: '{"name":"Seed","categoryId":1}',
  })
  assert.equal(seeded.status, 201)
  const seed = seeded.text
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
    agent,
    slowestMs: 0,
    createdAgainAfterMs: new Map(),
    gotAfterCreate: 0,
  }
  const stalled: net.Socket[] = []

  let processEnding = false
  let running = true
  const loops = Array.from({ length: LOOPS }, async (_, loop) => {
    for (let n = 0; running; n++) await send(cell, KINDS[(loop + n) % KINDS.length] ?? 'list', loop, n, () => processEnding && fault === 'instance SIGKILLed')
  })
  const walking = replicaCluster === undefined ? undefined : walkWhileRunning(cell, () => running)

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
        await crashWithCreatesWaiting(cluster.primary, env)
        await cluster.standby.promote()
        await cluster.pooler.repoint(cluster.standby)
        ended()
        break
      case 'standby not yet promoted': {
        assert.ok(cluster !== undefined)
        const { pooler, primary, standby } = cluster
        await repointPaused(pooler, standby)
        heal = async () => {
          await repointPaused(pooler, primary)
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
      case 'standby paused': {
        // Replay stops, creates go on: the standby falls behind past the bound and serves nothing until it catches up.
        assert.ok(replicaCluster !== undefined)
        const { standby } = replicaCluster
        await standby.query('SELECT pg_wal_replay_pause()')
        await until(async () => (await replicaUsable(metricsPorts, service, standby)) === 0, 10_000, () => 'the paused standby was still used')
        heal = async () => {
          await standby.query('SELECT pg_wal_replay_resume()')
          await until(async () => (await replicaUsable(metricsPorts, service, standby)) === 1, 10_000, () => 'the resumed standby was not used again')
          ended()
        }
        break
      }
      case 'standby stopped': {
        assert.ok(replicaCluster !== undefined)
        const { standby } = replicaCluster
        await standby.stop('fast')
        heal = async () => {
          await standby.start()
          ended()
        }
        break
      }
      case 'primary stopped': {
        assert.ok(replicaCluster !== undefined)
        const { primary } = replicaCluster
        await primary.stop('fast')
        // Ready still: balancers keep sending the reads the standbys serve.
        const ready = await request(cell.agent, `${service.baseUrl}/readyz`, { headers: {} })
        assert.equal(ready.status, 200, `readyz with the primary stopped: ${ready.text}`)
        heal = async () => {
          await primary.start()
          ended()
        }
        break
      }
      case 'failover onto a standby': {
        // The primary dies; its synchronous standby takes over, the pooler points the primary's address at it,
        // and the delayed standby follows it.
        const primaryPooler = replicaCluster?.poolers[0]
        assert.ok(replicaCluster !== undefined && primaryPooler !== undefined)
        const { primary, standby, delayed } = replicaCluster
        await crashWithCreatesWaiting(primary, env)
        await standby.promote()
        await primaryPooler.repoint(standby)
        await follow(delayed, standby)
        ended()
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
      case 'SIGTERM under keep-alive load':
      case 'SIGTERM to the process group': {
        processEnding = true
        if (fault === 'instance SIGKILLed') await stopServer(service, 'SIGKILL', 15_000)
        else await stopWithinBound(service, fault, { group: fault === 'SIGTERM to the process group' })
        heal = async () => {
          service = await start()
          processEnding = false
        }
        break
      }
      case 'log reader gone':
        // Every line the service logs from now on fails with EPIPE, as under `petstore serve | head`.
        assert.ok(service.child.stdout !== null)
        service.child.stdout.destroy()
        break
      case 'half TLS handshakes':
        for (let i = 0; i < STALLED_HANDSHAKES; i++) stalled.push((await stalledHandshake(service.port, i % 2 === 0 ? Buffer.alloc(0) : HALF_CLIENT_HELLO)).socket)
        break
      case 'certificate folder swapped': {
        assert.ok(certificates !== undefined && ca !== undefined)
        for (const name of ['second', 'third']) {
          const { fingerprint } = certificates.swap(name)
          await until(
            async () => (await servedFingerprint(service.port, ca)) === fingerprint,
            CERTIFICATE_SERVED_WITHIN_MS,
            () => `new connections were not given the ${name} certificate put in the swapped folder`,
          )
        }
        break
      }
      case 'database file moved away and back': {
        // A file renamed away is whole where it went, but a create acknowledged into it from now on would be lost
        // to the path: the service must refuse them. Moved back, the file is served again after a restart, as
        // docs/deploying.md tells the operator.
        const file = sqliteFile(env)
        fs.renameSync(file, `${file}.moved`)
        cell.fileAway = true
        heal = async () => {
          fs.renameSync(`${file}.moved`, file)
          cell.fileAway = false
          await stopWithinBound(service, fault)
          service = await start()
          ended()
        }
        break
      }
      case 'disk full': {
        const disk = path.dirname(sqliteFile(env))
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
    const [listed] = await Promise.all([runCli(['keys', 'list'], env, dir, { timeoutMs: 30_000 }), sleep(FAULT_MS)])
    if (listed.code !== 0) {
      assert.equal(listed.code, 1, `keys list during ${fault}: exit ${listed.code}\n${listed.stderr}`)
      assert.match(listed.stderr, /^petstore: /, `keys list during ${fault}`)
      assert.doesNotMatch(listed.stderr, /\n\s+at /, `keys list during ${fault} printed a stack trace`)
    }
    if (!ENDS_PROCESS.has(fault)) assert.equal(service.child.exitCode, null, `the process exited during ${fault}:\n${service.output()}`)
    healed = true
    await heal()
    await sleep(LOAD_AFTER_MS)
  } finally {
    running = false
    await Promise.all(loops)
    const walked = await walking
    if (walked !== undefined) t.diagnostic(`${walked.walks} walks of every page during the cell, ${walked.cut} cut short; ${cell.gotAfterCreate} pets read back after their create`)
    if (walked !== undefined) assert.ok(walked.walks > 0, 'no walk of the pages ended')
    if (!healed) await heal()
  }

  // Every keyed create is retried with its key, LOOPS at a time as clients would: one that got no 201 must
  // get its one pet, soon, and one that did, the same answer again.
  const toRetry = [...cell.keyed]
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      for (let keyed = toRetry.shift(); keyed !== undefined; keyed = toRetry.shift()) {
        const retried = await retryUntilCreated(cell, keyed)
        if (keyed.answer !== undefined) {
          assert.equal(retried.body, keyed.answer, 'a retry of an acknowledged keyed create got another answer')
          assert.ok(retried.replayed)
        }
        cell.acknowledged.set(String((JSON.parse(retried.body) as { id: number }).id), retried.body)
      }
    }),
  )

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

  if (replicaCluster !== undefined) {
    const replicaReads = await Promise.all([service, ...others].map((instance) => metricValue(metricsPorts, instance, /^petstore_db_reads_total\{read="(pet|page)",target="replica"\} (\d+)/gm)))
    t.diagnostic(`pets and pages read on standbys, by instance: ${JSON.stringify(replicaReads)}`)
    assert.ok(replicaReads.every((count) => count > 0), 'an instance read nothing on its standbys')
  }
  cell.agent.destroy()
  // Open still: the stop must close them itself.
  assert.ok(stalled.every((socket) => !socket.closed), 'a stalled handshake was closed before the stop')
  try {
    for (const instance of [service, ...others]) {
      assert.equal(instance.child.exitCode, null, `the process exited after ${fault}:\n${instance.output()}`)
      assert.doesNotMatch(instance.output(), /fatal error|uncaught|unhandled/i, 'the log shows a crash')
      await stopWithinBound(instance, fault)
    }
  } finally {
    for (const socket of stalled) socket.destroy()
  }
  assert.deepEqual(cell.problems, [], `${fault} on ${engine}: answers ${JSON.stringify([...cell.answers])}; the services' errors:\n${errorLines([service, ...others])}`)
  if (engine === 'pgbouncer' || REPLICA_ENGINES.has(engine)) {
    const unavailable = [...cell.answers].filter(([what]) => what.endsWith(' 503'))
    t.diagnostic(
      `${fault}: ${(cell.faultEndedAt ?? 0) - (cell.faultStartedAt ?? 0)} ms from its start to its end; each instance's first create ${JSON.stringify([...cell.createdAgainAfterMs.values()])} ms after the fault ended, the slowest answer ${cell.slowestMs} ms; ` +
        `503s ${JSON.stringify(unavailable)}; answers ${JSON.stringify([...cell.answers])}`,
    )
    for (const instance of [service, ...others]) {
      const after = cell.createdAgainAfterMs.get(instance.baseUrl)
      assert.ok(after !== undefined && after <= RETRY_WITHIN_MS, `${instance.baseUrl} created nothing within ${RETRY_WITHIN_MS} ms after ${fault}`)
    }
    if (READS_SERVED.has(fault)) {
      const failedReads = unavailable.filter(([what]) => READS.has(what.slice(0, -' 503'.length) as Kind))
      assert.deepEqual(failedReads, [], `a read failed on a ${fault}; the services' errors:\n${errorLines([service, ...others])}`)
    }
  }
  const failed = [...cell.answers].filter(([what]) => / (503|409)$/.test(what))
  if (NEVER_FELT.has(fault)) assert.deepEqual([...failed, ...cell.connectionErrors], [], `a request failed during ${fault}`)
  // The fault really was met: some request failed, or the process really ended.
  else assert.ok(failed.length + cell.connectionErrors.length > 0 || ENDS_PROCESS.has(fault), `${fault} was never felt: ${JSON.stringify([...cell.answers])}`)
}
