import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import https from 'node:https'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { poolerUnavailable } from '../../scripts/pg-cluster.js'
import { errorShape, stopProcess, waitUntilReady } from '../../scripts/petstore-process.js'
import { makeCertificate, opensslSkip } from '../certificates.js'
import { ENGINES, type Engine, createTestDatabase, storageEngine } from '../helper.js'
import { type Answer, type Nginx, nginxSkip, requestThroughNginx, startNginx } from '../ops/nginx.js'
import { poolerOff } from '../postgres.js'
import { type ServerProcess, cleanupProcesses, freePort, refusedWithin, runCommand, startServer, stopServer, trackedTempDir, until } from '../processes.js'
import { FIRST_WINDOWED_RELEASE, type Release, buildNextRelease, buildReleaseFromGit, currentRelease, dependenciesDiffer, previousReleaseTag } from './releases.js'

/*
 * Two releases on one database behind nginx with the shipped configuration (issue 38): this checkout and
 * the next release (test/upgrade/releases.ts: one more migration that only adds, the next minor version),
 * and, once one is tagged, the previous release and this one. Two instances of the older release are
 * replaced by the newer one at a time, and then rolled back the same way, under loops of keyed creates,
 * getPets of acknowledged pets and listPets walks that follow `Link`, on SQLite (two instances on one file)
 * and on PostgreSQL through PgBouncer. In each mixed state each release's CLI rotates, creates and revokes
 * keys that the other release's instances serve, and keyed creates sent to one release are sent again to
 * the other; once the newer release has migrated, an instance of the older one is restarted. Every keyed
 * create is sent again to the release that did not make it (nginx's access log tells which did): to the
 * newer release once it serves alone, and after the rollback to the older one or to an instance of the
 * newer one started beside it.
 * What must hold is what a client is promised at one version: no 500, every 5xx a 503 with Retry-After;
 * every acknowledged pet kept, once; a keyed create replayed, whichever release is asked; every page walk
 * exact. What clients saw during each roll is printed as one line of JSON.
 */

after(cleanupProcesses)

const SKIP = nginxSkip === false ? opensslSkip : `${nginxSkip}: the rolling upgrade behind nginx is skipped`
/** The runner's PgBouncer in front of its PostgreSQL, as pooler.test.ts decides, saying why it is not there. */
const POOLER_SKIP =
  !ENGINES.includes('pgbouncer') &&
  `PostgreSQL through PgBouncer is not in this run: ${poolerOff() ?? poolerUnavailable() ?? 'PETSTORE_TEST_DATABASE_URL or PETSTORE_TEST_POOLER_PORT is unset (test/run.ts sets both)'}`

/** Keep-alive clients of nginx, per kind of request. */
const LOOPS = { create: 2, get: 2, walk: 2 } as const
/** Each step of a roll serves at least this long, and this many answers, before the next step. */
const STEP_MS = 1_500
const STEP_ANSWERS = 150
/** Keyed creates sent to an instance of one release and again to one of the other, each way, in each mixed state. */
const CROSS_CREATES = 20

type Kind = 'create' | 'get' | 'page'

/** A create sent with an Idempotency-Key, and the body of the first 201 it got, once it got one. */
interface Keyed {
  key: string
  name: string
  body: string
  /** Its first try has been answered, or has failed. */
  settled: boolean
  answer?: string
  /** The release whose instance answered its first try 201, when known. */
  maker?: Release
  /** The releases that have answered it again, 201 and the same pet. */
  replayedOn: Set<Release>
}

/** What clients saw during one part of the run: answers per `${kind} ${status}`, and latencies. */
interface Seen {
  startedAt: number
  endedAt?: number
  counts: Map<string, number>
  latencies: Record<Kind, number[]>
  /** nginx's access log lines when this part began and ended. */
  logFrom: number
  logTo?: number
  walks: number
  /** Each step of the roll, and how long it took. */
  steps: string[]
  /** For each instance, how long after `keys revoke` exited the revoked key's first refusal came. */
  refusedAfterMs: number[]
  /** Each 5xx, as `<kind> <status> <code> Retry-After <seconds>`. */
  unavailable: string[]
}

/** A 5xx as the diagnostic lists it: its kind, status, error code and Retry-After. */
function describeUnavailable(kind: Kind, answer: Answer): string {
  const code = /"code":"([^"]+)"/.exec(answer.text)?.[1] ?? '(no code)'
  return `${kind} ${answer.status} ${code} Retry-After ${answer.headers['retry-after'] ?? '(none)'}`
}

function percentile(values: number[], p: number): number | null {
  const sorted = values.toSorted((a, b) => a - b)
  return sorted.length === 0 ? null : Math.round((sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0) * 10) / 10
}

/** Two releases on one database: the one upgraded from, the one upgraded to, and the migrations only the latter has. */
interface Pair {
  old: Release
  next: Release
  /** Migrations of the engine that `next` applies and `old` does not know. */
  added: string[]
}

let nextBuild: Promise<Release> | undefined
/** This release, and the next built from it: built once for every engine, since a compile takes seconds. */
async function toNext(engine: Engine): Promise<Pair> {
  const old = currentRelease()
  const next = await (nextBuild ??= buildNextRelease(path.join(trackedTempDir('petstore-next-release-'), 'release')))
  return { old, next, added: newMigrations(old, next, engine) }
}

/** The previous release tagged in git history, built from it, and this release. */
async function fromPrevious(tag: string, engine: Engine): Promise<Pair> {
  const old = await buildReleaseFromGit(tag, path.join(trackedTempDir('petstore-previous-release-'), 'release'))
  const next = currentRelease()
  return { old, next, added: newMigrations(old, next, engine) }
}

function newMigrations(old: Release, next: Release, engine: Engine): string[] {
  const known = new Set(old.migrations[storageEngine(engine)])
  return next.migrations[storageEngine(engine)].filter((name) => !known.has(name))
}

const previousTag = await previousReleaseTag()
const previousSkip =
  previousTag === undefined ? `no release from ${FIRST_WINDOWED_RELEASE} on is tagged before this one in this history (a shallow clone has none)` : await dependenciesDiffer(previousTag)

const ROLLS: { engine: Engine; pair: string; releases: () => Promise<Pair>; skip: string | false }[] = [
  { engine: 'sqlite', pair: 'to the next release', releases: () => toNext('sqlite'), skip: SKIP },
  { engine: 'pgbouncer', pair: 'to the next release', releases: () => toNext('pgbouncer'), skip: SKIP || POOLER_SKIP },
  // One engine only: the file's time is bounded, and what this adds is the other pair of releases.
  {
    engine: 'sqlite',
    pair: `from ${previousTag ?? 'the previous release'}, built from git history,`,
    releases: () => fromPrevious(previousTag ?? '', 'sqlite'),
    skip: SKIP || (previousSkip ?? false),
  },
]

// Bounded for a slow machine; what each step of a roll took is in its diagnostic.
for (const { engine, pair, releases, skip } of ROLLS) {
  const label = engine === 'sqlite' ? 'SQLite, two instances on one file' : 'PostgreSQL through PgBouncer'
  describe(`a rolling upgrade ${pair} and a rollback behind nginx, on ${label}`, { skip, timeout: 240_000 }, () => {
    let old: Release
    let next: Release
    /** The migrations `next` applies that `old` does not know, which `old` must name in one warning. */
    let newer: string[] = []
    /** Whether a line names every migration in `newer`. */
    const namesNewer = (line: string) => newer.length > 0 && newer.every((name) => line.includes(name))
    const dir = trackedTempDir(`petstore-upgrade-${engine}-`)
    let env: Record<string, string> = {}
    let drop: (() => Promise<void>) | undefined
    let nginx: Nginx | undefined
    let ca: Buffer[] = []
    let publicBase = ''
    /** The two instances behind nginx, each on its port for good, and the release each runs. */
    const instances: { server?: ServerProcess; release: Release; port: number }[] = []
    /** Every instance started, on which port, of which release, when it was spawned and when it was ready. */
    const started: { port: number; release: Release; spawned: number; ready: number }[] = []
    /** The key the load uses: the newest of its rotations. */
    const loadKey = { id: '', key: '' }

    const acknowledged = new Map<string, string>()
    /** The ids of `acknowledged` in the order they were acknowledged: the first n were all there before the n+1th. */
    const acknowledgedIds: string[] = []
    const keyed: Keyed[] = []
    const problems = { contract: [] as string[], kept: [] as string[], replays: [] as string[], walks: [] as string[], keys: [] as string[], restart: [] as string[] }
    /** POSTs nginx answered 502 itself: sent on a connection the instance closed in that instant (docs/deploying.md). */
    let racedPosts = 0
    let crossReplays = 0
    let walkedPages = 0
    const seen = new Map<string, Seen>()
    let part: Seen | undefined

    function begin(name: string): void {
      const now = performance.now()
      const log = nginx?.accessLog().length ?? 0
      if (part !== undefined) Object.assign(part, { endedAt: now, logTo: log })
      part = { startedAt: now, counts: new Map(), latencies: { create: [], get: [], page: [] }, logFrom: log, walks: 0, steps: [], refusedAfterMs: [], unavailable: [] }
      seen.set(name, part)
    }

    /** `work`, its time recorded among the current part's steps as `what`. */
    async function timed<T>(what: string, work: () => Promise<T>): Promise<T> {
      const from = performance.now()
      try {
        return await work()
      } finally {
        part?.steps.push(`${what} ${Math.round(performance.now() - from)} ms`)
      }
    }

    function acknowledge(text: string): void {
      const id = String((JSON.parse(text) as { id: number }).id)
      if (!acknowledged.has(id)) acknowledgedIds.push(id)
      acknowledged.set(id, text)
    }

    /** One request to nginx, over HTTPS trusting the test's certificate. */
    const send = (method: string, url: string, options?: Parameters<typeof requestThroughNginx>[4]) => requestThroughNginx(nginx?.port, ca, method, url, options)


    /** One request straight to an instance. */
    async function direct(server: ServerProcess | undefined, method: string, url: string, { key = loadKey.key, headers = {}, body }: { key?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
      if (server === undefined) throw new Error('no instance is running there')
      const response = await fetch(`${server.baseUrl}${url}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body,
        signal: AbortSignal.timeout(30_000),
      })
      return { status: response.status, headers: Object.fromEntries(response.headers), text: await response.text() }
    }

    /** Counts an answer of `kind` in the current part, and says what is wrong with it against what every release promises. */
    function check(kind: Kind, answer: Answer, startedAt: number, expected: number): string | undefined {
      if (part === undefined) throw new Error('no part of the run has begun')
      part.counts.set(`${kind} ${answer.status}`, (part.counts.get(`${kind} ${answer.status}`) ?? 0) + 1)
      part.latencies[kind].push(performance.now() - startedAt)
      if (answer.status >= 500) part.unavailable.push(describeUnavailable(kind, answer))
      if (answer.status === expected) return undefined
      const wrong = errorShape(answer.status, answer.text)
      if (wrong !== undefined) return `${kind} ${answer.status}: ${wrong}`
      if (answer.status !== 503) return `${kind}: ${answer.status} ${answer.text.slice(0, 200)}`
      if (answer.headers['retry-after'] === undefined) return `${kind}: 503 without Retry-After`
      return undefined
    }

    const createBody = (name: string) => JSON.stringify({ name, categoryId: 1 + (name.length % 50) })

    /** A keyed create through nginx, as a client of the load sends it. */
    async function keyedCreate(agent: https.Agent, name: string): Promise<void> {
      const sent: Keyed = { key: randomUUID(), name, body: createBody(name), settled: false, replayedOn: new Set() }
      keyed.push(sent)
      const startedAt = performance.now()
      let answer: Answer
      try {
        answer = await send('POST', '/v1/pets', {
          headers: { authorization: `Bearer ${loadKey.key}`, 'content-type': 'application/json', 'idempotency-key': sent.key },
          body: sent.body,
          agent,
        })
      } catch (error) {
        problems.contract.push(`create: no answer from nginx: ${(error as Error).message}`)
        return
      } finally {
        sent.settled = true
      }
      // The one 502 HTTP leaves possible behind nginx: retried with its key below, as a client would.
      if (answer.status === 502 && answer.headers['retry-after'] !== undefined) {
        racedPosts++
        part?.counts.set('create 502', (part.counts.get('create 502') ?? 0) + 1)
        part?.unavailable.push(describeUnavailable('create', answer))
        return
      }
      const wrong = check('create', answer, startedAt, 201)
      if (wrong !== undefined) problems.contract.push(wrong)
      if (answer.status === 201) {
        sent.answer = answer.text
        acknowledge(answer.text)
        const id = String((JSON.parse(answer.text) as { id: number }).id)
        if (answer.headers.location !== `${publicBase}/v1/pets/${id}`) problems.contract.push(`create: Location ${answer.headers.location}`)
      }
    }

    async function getAcknowledged(agent: https.Agent, n: number): Promise<void> {
      const id = acknowledgedIds[(n * 7919) % acknowledgedIds.length] ?? '1'
      const startedAt = performance.now()
      let answer: Answer
      try {
        answer = await send('GET', `/v1/pets/${id}`, { headers: { authorization: `Bearer ${loadKey.key}` }, agent })
      } catch (error) {
        problems.contract.push(`get: no answer from nginx: ${(error as Error).message}`)
        return
      }
      const wrong = check('get', answer, startedAt, 200)
      if (wrong !== undefined) problems.contract.push(wrong)
      if (answer.status === 200 && answer.text !== acknowledged.get(id)) problems.kept.push(`pet ${id} acknowledged as ${acknowledged.get(id)}, read as ${answer.text}`)
    }

    /**
     * Every page from the first, following `Link`, each sent by `page(url, n)`: the ids must rise strictly
     * from page to page (none repeated), and every pet acknowledged before the walk began must be in it, as
     * acknowledged. A 503 is sent again, as a client would (at once, to keep the test short). Returns what it read.
     */
    async function walk(page: (url: string, n: number) => Promise<Answer>, { limit, kind = 'page' }: { limit: number; kind?: Kind | undefined }): Promise<Map<string, string>> {
      const before = acknowledgedIds.length
      const read = new Map<string, string>()
      let last = -1
      let next: string | undefined = `/v1/pets?limit=${limit}`
      for (let n = 0; next !== undefined; n++) {
        const sent = async (url: string) => {
          const startedAt = performance.now()
          const answer = await page(url, n)
          const wrong = kind === undefined ? undefined : check(kind, answer, startedAt, 200)
          if (wrong !== undefined) problems.contract.push(wrong)
          return answer
        }
        let answer = await sent(next)
        for (let tries = 0; answer.status === 503 && tries < 100; tries++) {
          await sleep(50)
          answer = await sent(next)
        }
        if (answer.status !== 200) {
          problems.walks.push(`page ${n} of a walk (${next}): ${answer.status} ${answer.text.slice(0, 200)}`)
          return read
        }
        walkedPages++
        // Ids stay below 2^53 here: a Number holds them exactly.
        for (const pet of JSON.parse(answer.text) as { id: number }[]) {
          if (pet.id <= last) problems.walks.push(`page ${n} of a walk (${next}): id ${pet.id} after ${last}`)
          last = pet.id
          read.set(String(pet.id), JSON.stringify(pet))
        }
        const link = /<([^>]+)>; rel="next"/.exec(String(answer.headers.link ?? ''))?.[1]
        if (link !== undefined && !link.startsWith(`${publicBase}/v1/pets?`)) problems.walks.push(`Link ${link}`)
        next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search
      }
      const skipped = acknowledgedIds.slice(0, before).filter((id) => !read.has(id))
      if (skipped.length > 0) problems.walks.push(`a walk of ${read.size} pets skipped ${skipped.length} acknowledged before it began: ${skipped.slice(0, 5).join(', ')}`)
      return read
    }

    let running = false
    async function loop(kind: keyof typeof LOOPS, i: number): Promise<void> {
      const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca })
      try {
        for (let n = 0; running; n++) {
          if (kind === 'create') await keyedCreate(agent, `roll ${engine} ${i}.${n}`)
          else if (kind === 'get') await getAcknowledged(agent, i * 1_000_003 + n)
          else {
            try {
              await walk((url) => send('GET', url, { headers: { authorization: `Bearer ${loadKey.key}` }, agent }), { limit: n % 2 === 0 ? 100 : 37 })
              if (part !== undefined) part.walks++
            } catch (error) {
              problems.contract.push(`page: no answer from nginx: ${(error as Error).message}`)
            }
          }
        }
      } finally {
        agent.destroy()
      }
    }

    /** Lets the load run on the instances as they are: at least STEP_MS and STEP_ANSWERS. */
    async function step(): Promise<void> {
      const from = performance.now()
      const answers = () => [...(part?.counts.values() ?? [])].reduce((sum, n) => sum + n, 0)
      const already = answers()
      await until(() => performance.now() - from >= STEP_MS && answers() - already >= STEP_ANSWERS, 60_000, () => `the load got ${answers() - already} answers`)
    }

    /** Once the next release has migrated the database: the old release then runs on a schema it does not know all of. */
    let migratedByNext = false

    /**
     * `node <release's bin> …args` on this database; its stdout. On a database the next release migrated, the old
     * release's command must warn once, on stderr, naming the migration it does not know; the next's never.
     */
    async function cli(release: Release, ...args: string[]): Promise<string> {
      const run = await runCommand(process.execPath, [release.bin, ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, timeoutMs: 30_000 })
      if (run.code !== 0) throw new Error(`petstore ${args.join(' ')} of ${release.version} exited with ${run.code ?? run.signal}:\n${run.stderr}`)
      const named = run.stderr.split('\n').filter(namesNewer)
      const warned = named.length === 1 && named[0]?.startsWith('petstore: warning: ') === true
      if (release === old && migratedByNext && newer.length > 0 && !warned) {
        problems.restart.push(`petstore ${args.join(' ')} of ${old.version} did not warn once naming ${newer.join(', ')}:\n${run.stderr}`)
      }
      if (release === next && named.length > 0) problems.restart.push(`petstore ${args.join(' ')} of ${next.version} named its own migration:\n${run.stderr}`)
      return run.stdout
    }

    async function serve(release: Release, port: number): Promise<ServerProcess> {
      const instance = { port, release, spawned: Date.now(), ready: Number.POSITIVE_INFINITY }
      started.push(instance)
      const server = await startServer(env, dir, [], { port, bin: release.bin })
      instance.ready = Date.now()
      return server
    }

    /**
     * The release that answered each keyed create sent through nginx with 201, from nginx's access log: the
     * instance it was last sent to, and the release started on that port last before the answer. One answered
     * between a spawn and its readiness could be either (the old instance's last answers are logged late on a
     * busy machine), and stays unknown.
     */
    function learnMakers(): void {
      const makers = new Map<string, Release>()
      for (const line of nginx?.accessLog() ?? []) {
        const [, tried = '', at = '', key = ''] = /^201 POST \/v1\/pets tried (.+) answered .+ at (\d+\.\d+) key (\S+)$/.exec(line) ?? []
        const port = Number(tried.split(':').at(-1))
        const answeredAt = Number(at) * 1000
        const instance = started.filter((one) => one.port === port && one.spawned <= answeredAt).at(-1)
        if (instance !== undefined && instance.ready <= answeredAt) makers.set(key, instance.release)
      }
      for (const sent of keyed) sent.maker ??= makers.get(sent.key)
    }

    /** Instance `i` stopped (SIGTERM, drained) and started again on its port, of `release`. */
    async function replace(i: number, release: Release): Promise<ServerProcess> {
      const instance = instances[i]
      if (instance === undefined) throw new Error(`no instance ${i}`)
      if (instance.server !== undefined) {
        const exit = await stopServer(instance.server, 'SIGTERM', 15_000)
        if (exit.code !== 0) problems.contract.push(`instance ${i} of ${instance.release.version} exited with ${exit.code ?? exit.signal}:\n${instance.server.output()}`)
      }
      instance.server = undefined
      instance.release = release
      instance.server = await serve(release, instance.port)
      return instance.server
    }

    const accepted = async (server: ServerProcess | undefined, key: string) => (await direct(server, 'GET', '/v1/pets?limit=1', { key })).status

    /** Keyed creates sent to one instance and again to the other, each way: the second must replay the first. */
    async function crossRelease(): Promise<void> {
      const [a, b] = instances
      if (a?.release === b?.release) throw new Error('both instances run the same release')
      for (const [from, to] of [[a, b], [b, a]] as const) {
        for (let n = 0; n < CROSS_CREATES; n++) {
          const sent: Keyed = { key: randomUUID(), name: `cross ${engine} ${keyed.length}`, body: '', settled: true, maker: from?.release, replayedOn: new Set() }
          sent.body = createBody(sent.name)
          keyed.push(sent)
          const first = await direct(from?.server, 'POST', '/v1/pets', { headers: { 'idempotency-key': sent.key }, body: sent.body })
          if (first.status !== 201) {
            problems.replays.push(`a keyed create on ${from?.port}: ${first.status} ${first.text}`)
            continue
          }
          sent.answer = first.text
          acknowledge(first.text)
          const again = await direct(to?.server, 'POST', '/v1/pets', { headers: { 'idempotency-key': sent.key }, body: sent.body })
          if (again.status !== 201 || again.text !== first.text || again.headers['idempotent-replayed'] !== 'true') {
            problems.replays.push(`Idempotency-Key ${sent.key}: ${first.text} on ${from?.port}, then ${again.status} ${again.text} (Idempotent-Replayed: ${String(again.headers['idempotent-replayed'])}) on ${to?.port}`)
          } else if (to !== undefined) {
            sent.replayedOn.add(to.release)
          }
          crossReplays++
        }
      }
      // A walk whose pages come from either release in turn.
      await walk((url, n) => direct((n % 2 === 0 ? a : b)?.server, 'GET', url), { limit: 100, kind: undefined })
    }

    /** What `keys create` or `keys rotate` printed with --json. */
    const parseKey = (stdout: string) => JSON.parse(stdout) as { id: string; key: string }

    /**
     * `rotator` rotates the load's key, and the load goes on with the new one; `creator` makes a key that
     * `revoker` revokes. Each key must work, or stop working, on both instances, whatever release they run.
     */
    async function keysAcross(rotator: Release, creator: Release, revoker: Release): Promise<void> {
      const servers = instances.map((instance) => instance.server)
      const rotated = parseKey(await cli(rotator, 'keys', 'rotate', loadKey.id, '--grace', '1h', '--json'))
      for (const server of servers) {
        for (const key of [rotated.key, loadKey.key]) {
          const status = await accepted(server, key)
          if (status !== 200) problems.keys.push(`a key ${key === rotated.key ? 'rotated' : 'in its grace period'} by ${rotator.version}'s CLI: ${status} on ${server?.port}`)
        }
      }
      Object.assign(loadKey, rotated)
      const made = parseKey(await cli(creator, 'keys', 'create', '--name', `made by ${creator.version}`, '--json'))
      for (const server of servers) {
        const status = await accepted(server, made.key)
        if (status !== 200) problems.keys.push(`a key created by ${creator.version}'s CLI: ${status} on ${server?.port}`)
      }
      await cli(revoker, 'keys', 'revoke', made.id)
      const since = Date.now()
      await Promise.all(
        servers.map(async (server) => {
          try {
            const refused = await refusedWithin(() => direct(server, 'GET', '/v1/pets?limit=1', { key: made.key }), { since, withinMs: 2_000, after: `${revoker.version}'s keys revoke` })
            part?.refusedAfterMs.push(Date.now() - since)
            if (refused.status !== 401) problems.keys.push(`a key revoked by ${revoker.version}'s CLI: ${refused.status} on ${server?.port}`)
          } catch (error) {
            problems.keys.push(`a key revoked by ${revoker.version}'s CLI, on ${server?.port}: ${(error as Error).message}`)
          }
        }),
      )
      // Listed by the release that did not rotate.
      const listed = JSON.parse(await cli(creator, 'keys', 'list', '--json')) as { id: string; revokedAt: string | null }[]
      if (!listed.some((key) => key.id === rotated.id) || listed.find((key) => key.id === made.id)?.revokedAt === null) {
        problems.keys.push(`keys list of ${creator.version} does not show the rotated key and the revoked one: ${JSON.stringify(listed)}`)
      }
    }

    /**
     * Every keyed create that `release` did not make and has not answered yet, sent again with its key and body
     * straight to `servers` (of `release`) in turn: each must replay its first 201. One whose maker is unknown is
     * sent to both releases.
     */
    async function replayOn(servers: (ServerProcess | undefined)[], release: Release): Promise<void> {
      learnMakers()
      const due = keyed.filter((sent) => sent.settled && sent.maker !== release && !sent.replayedOn.has(release))
      let next = 0
      await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          const server = servers[i % servers.length]
          while (next < due.length) {
            const sent = due[next++] as Keyed
            let again = await direct(server, 'POST', '/v1/pets', { headers: { 'idempotency-key': sent.key }, body: sent.body })
            for (let tries = 0; again.status === 503 && tries < 100; tries++) {
              await sleep(50)
              again = await direct(server, 'POST', '/v1/pets', { headers: { 'idempotency-key': sent.key }, body: sent.body })
            }
            if (again.status !== 201) {
              problems.replays.push(`Idempotency-Key ${sent.key} retried on ${release.version}: ${again.status} ${again.text}`)
              continue
            }
            if (sent.answer === undefined) {
              // Its first try got no 201 (a 503, or nginx's 502): the retry makes or finds its one pet.
              sent.answer = again.text
              acknowledge(again.text)
            } else if (again.text !== sent.answer || again.headers['idempotent-replayed'] !== 'true') {
              problems.replays.push(`Idempotency-Key ${sent.key}: first ${sent.answer}, then on ${release.version} ${again.text} (Idempotent-Replayed: ${String(again.headers['idempotent-replayed'])})`)
              continue
            }
            sent.replayedOn.add(release)
          }
        }),
      )
    }

    before(async () => {
      ;({ old, next, added: newer } = await releases())
      const database = await createTestDatabase(engine, dir)
      drop = database.drop
      const port = await freePort()
      publicBase = `https://localhost:${port}`
      const certificate = makeCertificate(dir, 'nginx')
      ca = [certificate.pem]
      env = { ...database.env, PUBLIC_BASE_URL: publicBase, TRUST_PROXY: '127.0.0.1', RATE_LIMIT_PER_KEY: '0' }
      for (const release of [old, next]) assert.equal((await cli(release, '--version')).trim(), release.version)
      await cli(old, 'migrate')
      Object.assign(loadKey, parseKey(await cli(old, 'keys', 'create', '--name', 'rolling upgrade load', '--json')))
      const ports = new Set<number>()
      while (ports.size < 2) ports.add(await freePort())
      for (const instancePort of ports) instances.push({ release: old, port: instancePort })
      await Promise.all(instances.map(async (instance) => (instance.server = await serve(old, instance.port))))
      nginx = await startNginx(dir, { port, upstreams: [...ports], certificate })
      await waitUntilReady(nginx, `https://127.0.0.1:${port}/healthz`, { ca })
      for (let n = 0; n < 20; n++) {
        const seed = await direct(instances[n % 2]?.server, 'POST', '/v1/pets', { body: createBody(`seed ${n}`) })
        assert.equal(seed.status, 201, seed.text)
        acknowledge(seed.text)
      }

      running = true
      begin('steady')
      const loops = Object.entries(LOOPS).flatMap(([kind, count]) => Array.from({ length: count }, (_, i) => loop(kind as keyof typeof LOOPS, i)))
      try {
        // Twice as long as a step: the latencies before the roll that the roll's are read against.
        await step()
        await step()

        begin('upgrade')
        // PostgreSQL: the next release's `migrate` as a release step; SQLite: its first instance migrates as it starts.
        if (engine !== 'sqlite') await timed('migrate', () => cli(next, 'migrate'))
        await timed(`instance 0 to ${next.version}`, () => replace(0, next))
        migratedByNext = true
        await timed('load', step)
        await timed('keyed creates across releases', crossRelease)
        await timed('keys', () => keysAcross(next, old, next))
        // An instance of the old release restarted, as after a crash or on a drained node: the database
        // now has a migration it does not know.
        const restarted = await timed(`instance 1 restarted on ${old.version}`, () => replace(1, old)).catch((error: unknown) => {
          problems.restart.push(`the old release did not start on a database the next one migrated: ${(error as Error).message}`)
          return undefined
        })
        if (restarted !== undefined) {
          const status = await accepted(restarted, loadKey.key)
          if (status !== 200) problems.restart.push(`the restarted old instance answered ${status}`)
          const named = restarted.output().split('\n').filter(namesNewer)
          const warned = named.length === 1 && (JSON.parse(named[0] ?? '{}') as { level?: number }).level === 40
          if (newer.length > 0 && !warned) problems.restart.push(`${named.length} lines of its log name ${newer.join(', ')}, not one warning:\n${restarted.output()}`)
        }
        await timed('load', step)
        await timed(`instance 1 to ${next.version}`, () => replace(1, next))
        await timed('load', step)
        // Every keyed create so far that the next release did not make, replayed by it.
        await timed('keyed creates replayed', () => replayOn(instances.map((instance) => instance.server), next))

        begin('rollback')
        await timed(`instance 0 to ${old.version}`, () => replace(0, old))
        await timed('load', step)
        await timed('keyed creates across releases', crossRelease)
        await timed('keys', () => keysAcross(old, next, old))
        await timed(`instance 1 to ${old.version}`, () => replace(1, old))
        await timed('load', step)
        begin('after')
      } finally {
        running = false
        await Promise.all(loops)
      }
      // And every one since that the next release did not make, by an instance of it started beside the old
      // ones (as when rolling forward again); every one the old release did not make, by the old ones.
      const forward = await serve(next, await freePort())
      try {
        await replayOn([forward], next)
      } finally {
        await stopServer(forward, 'SIGTERM', 15_000)
      }
      await replayOn(instances.map((instance) => instance.server), old)
    })

    after(async () => {
      if (nginx !== undefined) await stopProcess(nginx, { killAfterMs: 5_000 })
      await Promise.all(instances.flatMap(({ server }) => (server === undefined ? [] : [stopServer(server, 'SIGTERM', 15_000).catch(() => undefined)])))
      await drop?.()
    })

    it('records what clients saw during each roll: every kind answered, some requests retried by nginx on the other instance', (t) => {
      const accessLog = nginx?.accessLog() ?? []
      const p99 = ({ latencies }: Seen) => ({ create: percentile(latencies.create, 99), get: percentile(latencies.get, 99), page: percentile(latencies.page, 99) })
      const steady = seen.get('steady') ?? assert.fail('no load before the roll')
      for (const roll of ['upgrade', 'rollback']) {
        const part = seen.get(roll) ?? assert.fail(`no ${roll}`)
        const { counts, startedAt, endedAt = startedAt, logFrom, logTo = accessLog.length, walks, steps, refusedAfterMs, unavailable } = part
        const retried = accessLog.slice(logFrom, logTo).filter((line) => line.includes(', ')).length
        const statuses = Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b)))
        t.diagnostic(
          JSON.stringify({
            engine,
            roll,
            from: roll === 'upgrade' ? old.version : next.version,
            to: roll === 'upgrade' ? next.version : old.version,
            seconds: Math.round((endedAt - startedAt) / 100) / 10,
            statuses,
            '5xx': unavailable.slice(0, 20),
            p99Ms: p99(part),
            p99MsBefore: p99(steady),
            walks,
            retriedByNginx: retried,
            revokedKeyRefusedAfterMs: refusedAfterMs,
            steps,
          }),
        )
        for (const kind of ['create 201', 'get 200', 'page 200']) assert.ok((counts.get(kind) ?? 0) > 0, `no ${kind} during the ${roll}: ${JSON.stringify(statuses)}`)
        assert.ok(walks > 0, `no page walk ended during the ${roll}`)
        assert.ok(retried > 0, `nginx retried no request during the ${roll}: no restart was noticed`)
      }
    })

    it('answers no 500: every 5xx is a 503 with Retry-After, but for the rare POST that nginx cannot send again', () => {
      assert.deepEqual(problems.contract.slice(0, 20), [], `${problems.contract.length} answers out of contract`)
      const creates = [...seen.values()].reduce((sum, { counts }) => sum + [...counts].filter(([what]) => what.startsWith('create ')).reduce((n, [, count]) => n + count, 0), 0)
      assert.ok(racedPosts <= Math.ceil(creates / 1_000), `${racedPosts} creates answered 502 by nginx out of ${creates}`)
    })

    it('keeps every pet it acknowledged, as acknowledged, and each keyed create once', async () => {
      const agent = new https.Agent({ keepAlive: true, ca })
      const stored = await walk((url) => send('GET', url, { headers: { authorization: `Bearer ${loadKey.key}` }, agent }), { limit: 100, kind: undefined })
      agent.destroy()
      assert.deepEqual(problems.kept.slice(0, 20), [])
      assert.deepEqual(
        [...acknowledged].filter(([id, body]) => stored.get(id) !== body).map(([id, body]) => `${body} reads as ${stored.get(id)}`).slice(0, 20),
        [],
        'pets acknowledged but not kept as acknowledged',
      )
      const names = new Map<string, number>()
      for (const body of stored.values()) {
        const { name } = JSON.parse(body) as { name: string }
        names.set(name, (names.get(name) ?? 0) + 1)
      }
      assert.deepEqual(
        keyed.filter(({ name }) => names.get(name) !== 1).map(({ key, name }) => `Idempotency-Key ${key} made ${names.get(name) ?? 0} pets named ${name}`).slice(0, 20),
        [],
      )
      assert.ok(acknowledged.size > 2 * STEP_ANSWERS, `${acknowledged.size} pets acknowledged`)
    })

    it('replays a keyed create retried on an instance of the other release: the same pet, Idempotent-Replayed', (t) => {
      assert.deepEqual(problems.replays.slice(0, 20), [], `${problems.replays.length} retries broke their promise`)
      assert.equal(crossReplays, 4 * CROSS_CREATES)
      const answered = keyed.filter((sent) => sent.answer !== undefined)
      // One whose maker is unknown was replayed by both releases.
      const notAcross = answered.filter((sent) => ![old, next].some((release) => release !== sent.maker && sent.replayedOn.has(release)) || (sent.maker === undefined && sent.replayedOn.size < 2))
      const known = answered.filter((sent) => sent.maker !== undefined)
      t.diagnostic(`${answered.length} keyed creates replayed by the other release: ${known.filter((sent) => sent.maker === old).length} made by ${old.version}, ${known.filter((sent) => sent.maker === next).length} by ${next.version}, ${answered.length - known.length} by either (replayed by both)`)
      assert.deepEqual(notAcross.map(({ key, maker, replayedOn }) => `${key} made by ${maker?.version ?? 'either'}, replayed by ${[...replayedOn].map((release) => release.version).join(', ')}`).slice(0, 20), [])
    })

    it('walks every page exactly across both releases: ids rising, none repeated, none acknowledged before the walk skipped', () => {
      assert.deepEqual(problems.walks.slice(0, 20), [], `${problems.walks.length} walks broke their promise`)
      assert.ok(walkedPages > 0)
    })

    it("accepts a key rotated or created with one release's CLI on the other's instances, and refuses one revoked with the other's", () => {
      assert.deepEqual(problems.keys, [])
    })

    it('runs the old release on the database the next one migrated: an instance restarted mid-upgrade serves, and it and each CLI command warn once naming the migration they do not know', () => {
      assert.deepEqual(problems.restart, [])
    })
  })
}
