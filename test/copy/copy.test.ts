import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import util from 'node:util'
import { after, before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import { BIN, ENGINES, type Engine, createTestDatabase } from '../helper.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// `petstore copy --from URL --to URL` between SQLite and PostgreSQL, both ways (issue 14).

after(cleanupProcesses)

/** Pets put on each source by SQL, besides those created through the API: enough to kill a copy half-way. */
const BULK_PETS = 20_000
/** An id no JavaScript number holds exactly. */
const BIG_ID = '9007199254740993'

/** Runs `statements` on the database of `url`; the rows of the last one, every value as text. */
type Value = string | number | bigint | null

async function onDatabase(url: string, ...statements: string[]): Promise<(string | null)[][]> {
  const text = (value: Value) => (value === null ? null : String(value))
  if (url.startsWith('sqlite://')) {
    const db = new Sqlite(url.slice('sqlite://'.length))
    try {
      let rows: Value[][] = []
      for (const statement of statements) {
        const prepared = db.prepare(statement)
        if (prepared.reader) rows = prepared.raw(true).safeIntegers(true).all() as Value[][]
        else prepared.run()
      }
      return rows.map((row) => row.map(text))
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    let rows: Value[][] = []
    for (const statement of statements) rows = (await client.query<Value[]>({ text: statement, rowMode: 'array' })).rows
    return rows.map((row) => row.map(text))
  } finally {
    await client.end()
  }
}

async function countPets(url: string): Promise<string> {
  const [[count] = []] = await onDatabase(url, 'SELECT count(*) FROM pets')
  return count ?? ''
}

async function json<T>(args: string[], env: Record<string, string>, dir: string): Promise<T> {
  return JSON.parse((await runCli([...args, '--json'], env, dir, { rejectOnFailure: true })).stdout) as T
}

/** Every page of GET /v1/pets (or `/v1/pets?status=…` in `query`), each page's body as the server wrote it. */
async function allPages(server: ServerProcess, key: string, query = ''): Promise<string[]> {
  const pages: string[] = []
  for (let url: string | undefined = `${server.baseUrl}/v1/pets?limit=100${query}`; url !== undefined; ) {
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
    const body = await response.text()
    assert.equal(response.status, 200, body)
    pages.push(body)
    url = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]?.replace(/^http:\/\/[^/]+/, server.baseUrl)
  }
  return pages
}

function post(server: ServerProcess, key: string, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.baseUrl}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body,
  })
}

/** The copy's table of counts and checksums, as printed. */
function summary(stdout: string): string[] {
  return stdout.split('\n').filter((line) => /^(pets|api_keys|idempotency_keys|deprecated_calls) /.test(line))
}

const SERVER_ENV = { RATE_LIMIT_PER_KEY: '0' }
const IDEMPOTENT_BODY = JSON.stringify({ name: 'Max, made once', categoryId: 2 })

interface Source {
  dir: string
  env: Record<string, string>
  server: ServerProcess
  keys: { live: string; reader: string; revoked: string; rotatedOld: string; rotatedNew: string }
  idempotent: { status: number; location: string | null; body: string }
  pages: string[]
  bigPet: string
}

/**
 * A source with every kind of row: keys live, read-only, revoked and rotated (in its grace period), pets made
 * through the API (one with an Idempotency-Key) and by SQL (BULK_PETS, and one with BIG_ID), deprecated
 * getPet calls counted; served by a server, as a source being copied is.
 */
async function createSource(engine: Engine): Promise<Source> {
  const dir = trackedTempDir('petstore-copy-source-')
  const { env } = await createTestDatabase(engine, dir)
  const create = async (name: string) => json<{ id: string; key: string }>(['keys', 'create', '--name', name], env, dir)
  const live = await create('live')
  const reader = await json<{ key: string }>(['keys', 'create', '--name', 'reader', '--scope', 'pets:read'], env, dir)
  const revoked = await create('revoked')
  await runCli(['keys', 'revoke', revoked.id], env, dir, { rejectOnFailure: true })
  const rotatedOld = await create('rotated')
  const rotatedNew = await json<{ key: string }>(['keys', 'rotate', rotatedOld.id, '--grace', '2h'], env, dir)

  let server = await startServer({ ...env, ...SERVER_ENV }, dir)
  const made = await post(server, live.key, IDEMPOTENT_BODY, { 'idempotency-key': 'copy-test-1' })
  const idempotent = { status: made.status, location: made.headers.get('location'), body: await made.text() }
  assert.equal(idempotent.status, 201, idempotent.body)
  for (const body of [{ name: 'Rex "the dog" é 🐕', categoryId: 1, status: 'pending' }, { name: 'Tom', categoryId: 3 }]) {
    assert.equal((await post(server, rotatedOld.key, JSON.stringify(body))).status, 201)
  }
  const petId = /"id":(\d+)/.exec(idempotent.body)?.[1] ?? ''
  for (const key of [live.key, live.key, rotatedNew.key]) {
    assert.equal((await fetch(`${server.baseUrl}/v1/pets/${petId}`, { headers: { authorization: `Bearer ${key}` } })).status, 200)
  }
  // Stopped, the server writes its deprecated-call counts.
  await stopServer(server)

  const series =
    engine === 'sqlite'
      ? `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${BULK_PETS}) `
      : ''
  const from = engine === 'sqlite' ? 'n' : `generate_series(1, ${BULK_PETS}) AS n(i)`
  await onDatabase(
    env.DATABASE_URL ?? '',
    `${series}INSERT INTO pets (name, category_id, status, created_at)
     SELECT 'bulk ' || i || ' ✓', 4611686018427387904 + i, CASE i % 4 WHEN 0 THEN NULL WHEN 1 THEN 'available' WHEN 2 THEN 'pending' ELSE 'sold' END, 1795305600000 + i
     FROM ${from}`,
    `INSERT INTO pets (id, name, category_id, status, created_at) ${engine !== 'sqlite' ? 'OVERRIDING SYSTEM VALUE ' : ''}
     VALUES (${BIG_ID}, 'Big', 9223372036854775807, 'sold', 1795305600000)`,
  )
  server = await startServer({ ...env, ...SERVER_ENV }, dir)
  const bigPet = await (await fetch(`${server.baseUrl}/v1/pets/${BIG_ID}`, { headers: { authorization: `Bearer ${live.key}` } })).text()
  assert.match(bigPet, new RegExp(`^\\{"id":${BIG_ID},"name":"Big","categoryId":9223372036854775807,`))
  return {
    dir,
    env,
    server,
    keys: { live: live.key, reader: reader.key, revoked: revoked.key, rotatedOld: rotatedOld.key, rotatedNew: rotatedNew.key },
    idempotent,
    pages: await allPages(server, live.key),
    bigPet,
  }
}

const DIRECTIONS: [Engine, Engine][] = [
  ['sqlite', 'postgres'],
  ['postgres', 'sqlite'],
]

for (const [fromEngine, toEngine] of DIRECTIONS) {
  describe(`petstore copy from ${fromEngine} to ${toEngine}`, { skip: !ENGINES.includes('postgres') && 'needs PostgreSQL' }, () => {
    let source: Source
    before(async () => {
      source = await createSource(fromEngine)
    })
    after(() => stopServer(source.server))
    const copy = (to: string) => runCli(['copy', '--from', source.env.DATABASE_URL ?? '', '--to', to], {}, source.dir, { timeoutMs: 60_000 })

    it('carries every pet byte for byte, keys, idempotent replays and deprecated counts, while the source serves; the next id is larger', { timeout: 90_000 }, async (t) => {
      const dir = trackedTempDir('petstore-copy-target-')
      const target = await createTestDatabase(toEngine, dir)
      t.after(() => target.drop())
      const sourceKeys = await json<unknown[]>(['keys', 'list'], source.env, source.dir)
      const sourceCalls = await json<{ keys: unknown[] }>(['deprecations'], source.env, source.dir)

      const copied = await copy(target.env.DATABASE_URL ?? '')
      assert.equal(copied.code, 0, copied.stderr)
      const toName = toEngine === 'sqlite' ? `SQLite database ${path.join(dir, 'petstore.db')}` : 'PostgreSQL database'
      assert.match(copied.stderr, new RegExp(`^Copying from ${fromEngine === 'sqlite' ? 'SQLite' : 'PostgreSQL'} database `))
      assert.ok(copied.stderr.includes(`Copying into ${toName}`), copied.stderr)
      assert.match(copied.stderr, /Copying: 100% \(20,012 of 20,012 rows\)\n[^]*Verifying: 100% /)
      assert.doesNotMatch(copied.stdout + copied.stderr, /:[^@/\s]+@/, 'never a password')
      assert.match(copied.stdout, /^Copied from .* into .*\.\nVerified: every table has the same rows and checksum on both sides\.\n/)
      const rows = summary(copied.stdout)
      assert.equal(rows.length, 4, copied.stdout)
      assert.match(rows[0] ?? '', /^pets +20004 +[0-9a-f]{64}$/)
      assert.match(rows[1] ?? '', /^api_keys +5 +[0-9a-f]{64}$/)
      assert.match(rows[2] ?? '', /^idempotency_keys +1 +[0-9a-f]{64}$/)
      assert.match(rows[3] ?? '', /^deprecated_calls +2 +[0-9a-f]{64}$/)

      // Every column of every key (hash aside: the keys working below prove it), and the counts.
      assert.deepEqual(await json<unknown[]>(['keys', 'list'], target.env, dir), sourceKeys)
      // The serving source flushes its getPet counts every few seconds, maybe while the copy runs: the copy
      // holds those of the instant it began, the ones read before it or the ones read after it.
      const sourceCallsAfter = await json<{ keys: unknown[] }>(['deprecations'], source.env, source.dir)
      const targetCalls = (await json<{ keys: unknown[] }>(['deprecations'], target.env, dir)).keys
      assert.ok(
        [sourceCalls.keys, sourceCallsAfter.keys].some((calls) => util.isDeepStrictEqual(calls, targetCalls)),
        `deprecated counts: ${JSON.stringify(targetCalls)}, not ${JSON.stringify(sourceCalls.keys)} nor ${JSON.stringify(sourceCallsAfter.keys)}`,
      )

      const server = await startServer({ ...target.env, ...SERVER_ENV }, dir)
      t.after(() => stopServer(server))
      const { live, reader, revoked, rotatedOld, rotatedNew } = source.keys
      assert.deepEqual(await allPages(server, live), source.pages, 'every page, byte for byte')
      assert.equal(source.pages.join('').match(/"id":/g)?.length, 20_004)
      const big = await fetch(`${server.baseUrl}/v1/pets/${BIG_ID}`, { headers: { authorization: `Bearer ${live}` } })
      assert.equal(await big.text(), source.bigPet)

      const status = async (key: string) => (await fetch(`${server.baseUrl}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } })).status
      assert.equal(await status(live), 200)
      assert.equal(await status(revoked), 401, 'a revoked key is still refused')
      assert.equal(await status(rotatedOld), 200, 'a rotated key still works in its grace period')
      assert.equal(await status(rotatedNew), 200)
      assert.equal(await status(reader), 200, 'a read-only key still reads')
      assert.equal((await post(server, reader, JSON.stringify({ name: 'Never', categoryId: 1 }))).status, 403, 'and still cannot create')

      const replay = await post(server, live, IDEMPOTENT_BODY, { 'idempotency-key': 'copy-test-1' })
      assert.equal(replay.status, source.idempotent.status)
      assert.equal(replay.headers.get('idempotent-replayed'), 'true')
      assert.equal(replay.headers.get('location')?.replace(/^http:\/\/[^/]+/, ''), source.idempotent.location?.replace(/^http:\/\/[^/]+/, ''))
      assert.equal(await replay.text(), source.idempotent.body)

      const next = await post(server, live, JSON.stringify({ name: 'After the copy', categoryId: 1 }))
      const nextBody = await next.text()
      assert.equal(next.status, 201, nextBody)
      assert.ok(BigInt(/"id":(\d+)/.exec(nextBody)?.[1] ?? '0') > BigInt(BIG_ID), `the next id follows every copied one: ${nextBody}`)
    })

    it('refuses a target that is not empty with exit 1 and leaves it as it was', async (t) => {
      const dir = trackedTempDir('petstore-copy-target-')
      const target = await createTestDatabase(toEngine, dir)
      t.after(() => target.drop())
      await runCli(['keys', 'create', '--name', 'already here'], target.env, dir, { rejectOnFailure: true })
      const keys = await json<unknown[]>(['keys', 'list'], target.env, dir)

      const refused = await copy(target.env.DATABASE_URL ?? '')
      assert.equal(refused.code, 1, refused.stderr)
      assert.match(refused.stderr, /petstore: the target is not empty: api_keys \(1 row\); copy only into an empty database \(nothing was written\)\n$/)
      assert.equal(refused.stdout, '')
      assert.deepEqual(await json<unknown[]>(['keys', 'list'], target.env, dir), keys)
      assert.equal(await countPets(target.env.DATABASE_URL ?? ''), '0')
    })

    it('leaves a target that a copy killed while writing left empty, and a second copy completes it', { timeout: 90_000 }, async (t) => {
      const dir = trackedTempDir('petstore-copy-target-')
      const target = await createTestDatabase(toEngine, dir)
      t.after(() => target.drop())
      const url = target.env.DATABASE_URL ?? ''

      const child = spawn(process.execPath, [BIN, 'copy', '--from', source.env.DATABASE_URL ?? '', '--to', url], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      t.after(() => child.kill('SIGKILL'))
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
      let stderr = ''
      // Killed once a tenth of the rows are written, well before the commit.
      await new Promise<void>((resolve) => {
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          stderr += chunk
          if (/Copying: [1-9]\d%/.test(stderr)) resolve()
        })
        void exited.then(() => resolve())
      })
      child.kill('SIGKILL')
      const [, signal] = await exited
      assert.equal(signal, 'SIGKILL', `the copy ended before it could be killed:\n${stderr}`)
      assert.equal(await countPets(url), '0', 'nothing of a killed copy remains')

      const second = await copy(url)
      assert.equal(second.code, 0, second.stderr)
      assert.match(summary(second.stdout)[0] ?? '', /^pets +20004 /)
      assert.equal(await countPets(url), '20004')
    })
  })
}

describe('petstore copy: usage', () => {
  const dir = trackedTempDir('petstore-copy-usage-')
  const sqlite = (name: string) => `sqlite://${path.join(dir, name)}`

  it('exits 2 without --from or --to, with a URL that is not a database URL, or with one database twice', async () => {
    for (const [args, message] of [
      [['--to', sqlite('b.db')], /^petstore: --from is required/],
      [['--from', sqlite('a.db')], /^petstore: --to is required/],
      [['--from', 'mysql://h/db', '--to', sqlite('b.db')], /^petstore: --from must start with sqlite:\/\/, postgres:\/\/ or postgresql:\/\//],
      [['--from', sqlite('a.db'), '--to', 'sqlite://relative.db'], /^petstore: --to must name an absolute path/],
      [['--from', 'postgres://u:secret@h:5432/db', '--to', 'postgres://u:other@h/db'], /^petstore: --from and --to name the same database/],
    ] as const) {
      const result = await runCli(['copy', ...args], {}, dir)
      assert.equal(result.code, 2, result.stderr)
      assert.match(result.stderr, message)
      assert.match(result.stderr, /Run "petstore copy --help" for usage\.\n$/)
    }
  })

  it('exits 1, creating nothing, when the SQLite source does not exist', async () => {
    const result = await runCli(['copy', '--from', sqlite('missing.db'), '--to', sqlite('b.db')], {}, dir)
    assert.equal(result.code, 1)
    assert.equal(result.stderr, `petstore: there is no SQLite database at ${path.join(dir, 'missing.db')} to copy (see --from)\n`)
  })
})
