import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import { postgresMigrations } from '../../src/storage/migrations/postgres/index.js'
import { ENGINES, type Engine, createTestDatabase } from '../helper.js'
import { TEST_POSTGRES_URL } from '../postgres.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// Two `petstore serve` processes on one PostgreSQL database, as behind a load balancer: what one
// writes, the other serves; a key revoked once is refused by both.

after(cleanupProcesses)

/** A key as `keys create --json` prints it (the fields these tests use). */
interface CreatedKey {
  id: string
  key: string
}

interface Answer {
  status: number
  contentType: string | null
  body: Buffer
}

const skip = TEST_POSTGRES_URL === undefined || TEST_POSTGRES_URL === '' ? 'PETSTORE_TEST_DATABASE_URL is not set: several instances share one PostgreSQL database only' : false

/** Straight to PostgreSQL, and through PgBouncer in transaction mode when the run has one. */
const ROUTES: readonly Engine[] = ENGINES.includes('pgbouncer') ? ['postgres', 'pgbouncer'] : ['postgres']

for (const engine of ROUTES) describe(`two instances on one PostgreSQL database${engine === 'pgbouncer' ? ', through PgBouncer' : ''}`, { skip, timeout: 60_000 }, () => {
  let env: Record<string, string> = {}
  let dir = ''
  let drop: (() => Promise<void>) | undefined
  let instances: ServerProcess[] = []
  let key = ''

  /** `node bin/petstore.js …` with only PATH and the database of these instances; resolves with stdout, rejects on a non-zero exit. */
  async function petstore(...args: string[]): Promise<string> {
    return (await runCli(args, env, dir, { rejectOnFailure: true })).stdout
  }

  async function createKey(name: string): Promise<CreatedKey> {
    return JSON.parse(await petstore('keys', 'create', '--name', name, '--json')) as CreatedKey
  }

  async function send(server: ServerProcess, secret: string, url: string, body?: string): Promise<Answer> {
    const response = await fetch(`${server.baseUrl}${url}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body,
      signal: AbortSignal.timeout(5_000),
    })
    return { status: response.status, contentType: response.headers.get('content-type'), body: Buffer.from(await response.arrayBuffer()) }
  }

  /** Runs `work(i)` for i in [0, total) with at most `inFlight` at a time. */
  async function pooled(total: number, inFlight: number, work: (i: number) => Promise<void>): Promise<void> {
    let next = 0
    const worker = async () => {
      while (next < total) await work(next++)
    }
    await Promise.all(Array.from({ length: inFlight }, worker))
  }

  before(async () => {
    dir = trackedTempDir('petstore-multi-')
    const database = await createTestDatabase(engine, dir)
    drop = database.drop
    env = database.env
    // At once, on a database no migration has touched: both race to migrate it. Info level, so
    // that each says whether it applied the migrations.
    instances = await Promise.all([0, 1].map(() => startServer({ ...env, LOG_LEVEL: 'info' }, dir)))
    key = (await createKey('multi-instance test')).key
  })

  after(async () => {
    await Promise.all(instances.map((server) => stopServer(server).catch(() => undefined)))
    await drop?.()
  })

  it('applies each migration exactly once when both start at the same time on a new database', async (t) => {
    const client = new pg.Client({ connectionString: env.DATABASE_URL })
    await client.connect()
    t.after(() => client.end())
    const { rows } = await client.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name')
    assert.deepEqual(
      rows.map((row) => row.name),
      Object.keys(postgresMigrations).sort(),
    )
    const appliedBy = instances.map((server) =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('"applied migrations"'))
        .map((line) => (JSON.parse(line) as { migrations: string[] }).migrations),
    )
    assert.deepEqual(
      appliedBy.flat(2).sort(),
      Object.keys(postgresMigrations).sort(),
      `each migration must be applied by one instance only: ${JSON.stringify(appliedBy)}`,
    )
  })

  it('serves a pet created through one instance byte for byte the same through the other, by getPet and listPets', async () => {
    const [a, b] = instances as [ServerProcess, ServerProcess]
    const created = await send(a, key, '/v1/pets', '{"name":"  Ünïcödé 🐕 名前  ","categoryId":9223372036854775807,"status":"pending"}')
    assert.equal(created.status, 201, created.body.toString())
    const id = /^\{"id":(\d+),/.exec(created.body.toString())?.[1]
    assert.ok(id !== undefined, created.body.toString())

    const fromA = await send(a, key, `/v1/pets/${id}`)
    const fromB = await send(b, key, `/v1/pets/${id}`)
    assert.equal(fromB.status, 200)
    assert.deepEqual(fromB.body, created.body)
    assert.deepEqual(fromB, fromA)

    const listA = await send(a, key, '/v1/pets?limit=100')
    const listB = await send(b, key, '/v1/pets?limit=100')
    assert.equal(listB.status, 200)
    assert.deepEqual(listB, listA)
    assert.ok(listB.body.includes(created.body), `listPets through B lacks ${created.body.toString()}: ${listB.body.toString()}`)
  })

  it('answers 200 concurrent creates spread over both instances with 201 and distinct ids, each read back identically through the other', { timeout: 30_000 }, async () => {
    const total = 200
    const inFlight = 40
    const statuses = ['available', 'pending', 'sold', undefined] as const
    const sentOf = (i: number) => {
      const status = statuses[i % statuses.length]
      return { name: `pet #${i} of many`, categoryId: 5000 + i, ...(status === undefined ? {} : { status }) }
    }
    const created = new Map<number, { id: number; body: Buffer }>()
    const refused: string[] = []
    await pooled(total, inFlight, async (i) => {
      const answer = await send(instances[i % 2] as ServerProcess, key, '/v1/pets', JSON.stringify(sentOf(i)))
      if (answer.status !== 201) refused.push(`#${i}: ${answer.status} ${answer.body.toString()}`)
      else created.set(i, { id: (JSON.parse(answer.body.toString()) as { id: number }).id, body: answer.body })
    })
    assert.deepEqual(refused, [])
    assert.equal(created.size, total)
    assert.equal(new Set([...created.values()].map(({ id }) => id)).size, total, 'two creates got the same id')
    for (const [i, { id, body }] of created) {
      assert.equal(body.toString(), JSON.stringify({ id, ...sentOf(i) }), `create #${i} answered another pet`)
    }

    const differing: string[] = []
    await pooled(total, inFlight, async (i) => {
      const { id, body } = created.get(i) ?? { id: 0, body: Buffer.alloc(0) }
      // Read through the instance that did not create it.
      const answer = await send(instances[(i + 1) % 2] as ServerProcess, key, `/v1/pets/${id}`)
      if (answer.status !== 200 || !answer.body.equals(body)) {
        differing.push(`#${i} (id ${id}): ${answer.status} ${answer.body.toString()} instead of ${body.toString()}`)
      }
    })
    assert.deepEqual(differing, [])
  })

  it('accepts a key made by the CLI on both instances, and both refuse it with 401 within 2 seconds of keys revoke', { timeout: 30_000 }, async (t) => {
    const doomed = await createKey('x')
    for (const server of instances) assert.equal((await send(server, doomed.key, '/v1/pets')).status, 200)

    await petstore('keys', 'revoke', doomed.id)
    const revokedAt = Date.now()
    // What is promised is about when a request is sent, not when a busy machine gets round to answering it:
    // every request sent 2 s or more after the revocation is refused.
    const refusedAfter = await Promise.all(
      instances.map(async (server) => {
        for (;;) {
          const sentAfter = Date.now() - revokedAt
          const answer = await send(server, doomed.key, '/v1/pets')
          if (answer.status !== 200) {
            assert.equal(answer.status, 401, answer.body.toString())
            assert.deepEqual(Object.keys(JSON.parse(answer.body.toString()) as object).sort(), ['code', 'message', 'status'])
            return sentAfter
          }
          assert.ok(sentAfter < 2_000, `${server.baseUrl} accepted a request sent ${sentAfter} ms after keys revoke`)
          await sleep(20)
        }
      }),
    )
    t.diagnostic(`the first request refused on each instance was sent ${refusedAfter.join(' ms and ')} ms after keys revoke exited`)

    for (const server of instances) {
      assert.equal((await send(server, key, '/v1/pets')).status, 200, 'the other key must keep working')
      assert.equal(server.child.exitCode, null, server.output())
    }
  })
})
