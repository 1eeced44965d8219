import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import pg from 'pg'
import { createMetrics } from '../../src/http/metrics.js'
import type { PostgresDatabase } from '../../src/storage/database.js'
import { openPostgresDatabase } from '../../src/storage/postgres/postgres-database.js'
import { CONTRACT_ENGINES, type TestApp, buildTestApp, errorBody, postPet } from '../helper.js'

// A PostgreSQL pool whose every connection is lent out for longer than a query waits for one (5 s): the
// waiters fail with 503 either way, and which 503 says whose the trouble is. A pool that keeps answering
// is this instance's load, `overloaded`, as the load shedding says it (readiness too: another instance may
// have room); a pool that has answered nothing for a second is the database's silence, `unavailable`.
// A table lock held from another connection makes the database slow, or stuck, for real.

const POOL_ONE = { DATABASE_POOL_SIZE: '1', RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '0' }

/** The value of one series of the app's metrics, 0 when absent. */
async function series(metrics: ReturnType<typeof createMetrics>, line: string): Promise<number> {
  const found = (await metrics.registry.metrics()).split('\n').find((text) => text.startsWith(`${line} `))
  return found === undefined ? 0 : Number(found.slice(line.length + 1))
}

/** Another session of the test's database, beside the service's: `use` takes the pets table from it, or reads it. */
async function withSession(testApp: TestApp, use: (client: pg.Client) => Promise<void>): Promise<void> {
  const { database } = testApp.config
  assert.equal(database.engine, 'postgres')
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    await use(client)
  } finally {
    await client.end()
  }
}

/** Takes the pets table in `mode` until `until` settles. */
async function lockUntil(client: pg.Client, until: Promise<unknown>, mode: 'ACCESS EXCLUSIVE' | 'SHARE' = 'ACCESS EXCLUSIVE'): Promise<void> {
  await client.query('BEGIN')
  await client.query(`LOCK TABLE pets IN ${mode} MODE`)
  await until.catch(() => undefined)
  await client.query('COMMIT')
}

/** The name of every pet the database holds, sorted. */
async function namesKept(testApp: TestApp): Promise<string[]> {
  let names: string[] = []
  await withSession(testApp, async (client) => {
    names = (await client.query<{ name: string }>('SELECT name FROM pets')).rows.map((row) => row.name)
  })
  return names.sort()
}

// Keyed, each create is a transaction of its own; unkeyed ones are committed in groups, many to a query.
const create = (testApp: TestApp, key: string, name: string) =>
  testApp.request(key, {
    method: 'POST',
    url: '/v1/pets',
    headers: { 'content-type': 'application/json', 'idempotency-key': `create-${name.replaceAll(' ', '-')}` },
    payload: JSON.stringify({ name, categoryId: 1 }),
  })

/** The 503s of `answers`, each in the error shape with `code` and its Retry-After. */
function refusals(answers: LightMyRequestResponse[], code: string, retryAfter: string): LightMyRequestResponse[] {
  const refused = answers.filter((answer) => answer.statusCode === 503)
  for (const answer of refused) {
    assert.equal(errorBody(answer).code, code, answer.body)
    assert.equal(answer.headers['retry-after'], retryAfter, answer.body)
  }
  return refused
}

for (const engine of CONTRACT_ENGINES.filter((engine) => engine !== 'sqlite')) {
  const withStandbys = engine.startsWith('standbys')
  describe(`a pool whose connections are all busy past a query's wait (${engine})`, { timeout: 60_000 }, () => {
    // With standbys, only where the primary is stuck and they are not: the rest is the primary's pool alone.
    if (!withStandbys) {
      it('answers the waiters 503 overloaded while the database answers slowly, readiness never unavailable, and creates exactly what it acknowledged', async () => {
        const metrics = createMetrics({ processMetrics: false })
        const testApp = await buildTestApp(engine, { env: POOL_ONE, metrics })
        try {
          const key = await testApp.createKey()
          const sent: Promise<LightMyRequestResponse>[] = []
          const probed: Promise<LightMyRequestResponse>[] = []
          await withSession(testApp, async (client) => {
            // The pets table taken for 250 ms of every 270: a few keyed creates get through each time, while
            // 200 a second come, until the first waits out its 5 s. The pool's one connection answers all along.
            let refused = false
            const cycling = (async () => {
              while (!refused) await lockUntil(client, sleep(250)).then(() => sleep(20))
            })()
            const limit = performance.now() + 30_000
            for (let i = 0; !refused && performance.now() < limit; i++) {
              const answer = create(testApp, key, `slow ${i}`)
              void answer.then((response) => (refused ||= response.statusCode === 503))
              sent.push(answer)
              // Readiness asked all along, in the queue with the creates.
              if (i % 50 === 0) probed.push(testApp.app.inject({ method: 'GET', url: '/readyz' }))
              await sleep(5)
            }
            await Promise.all([...sent, ...probed, cycling])
          })
          const answers = await Promise.all(sent)
          assert.deepEqual(new Set(answers.map((answer) => answer.statusCode)), new Set([201, 503]))
          const refused = refusals(answers, 'overloaded', '1')
          const probes = await Promise.all(probed)
          const notReady = refusals(probes, 'overloaded', '1')
          assert.deepEqual(probes.filter((probe) => probe.statusCode !== 503).map((probe) => probe.statusCode), Array(probes.length - notReady.length).fill(200))
          assert.equal(await series(metrics, 'petstore_overload_rejections_total{reason="database-pool"}'), refused.length + notReady.length)
          assert.equal(await series(metrics, 'petstore_db_unavailable_total'), 0)
          // Load is no fault: no error line for it.
          assert.deepEqual(testApp.logs.filter((line) => line.level === 50), [])
          // A refused create waited for a connection and never reached the database.
          const acknowledged = answers.filter((answer) => answer.statusCode === 201).map((answer) => (JSON.parse(answer.body) as { name: string }).name)
          assert.deepEqual(await namesKept(testApp), acknowledged.sort())
        } finally {
          await testApp.close()
        }
      })

      // Readiness behind a queue waits its 5 s only by chance (those before it leave the queue as their own 5 s
      // run out), so here the pool the readiness check asks is one the test holds: its one connection lent to
      // the test, which keeps querying on it, or not.
      for (const answering of [true, false]) {
        const [code, retryAfter] = answering ? ['overloaded', '1'] : ['unavailable', '5']
        it(`fails readiness 503 ${code} when its query waits out its 5 s for a pool whose connection ${answering ? 'answers others' : 'answers nothing'}`, async () => {
          let pool: PostgresDatabase | undefined
          const testApp = await buildTestApp(engine, {
            storage: (storage) => ({ ...storage, ping: () => (pool ?? storage).ping(), isOverloaded: (error) => (pool ?? storage).isOverloaded(error) }),
          })
          try {
            assert.equal(testApp.config.database.engine, 'postgres')
            pool = openPostgresDatabase({ url: testApp.config.database.url, poolSize: 1, preparedStatements: false })
            const lent = await pool.pool.connect()
            let held = true
            const querying = (async () => {
              while (held) {
                if (answering) await lent.query('SELECT 1')
                await sleep(100)
              }
            })()
            const readiness = await testApp.app.inject({ method: 'GET', url: '/readyz' })
            held = false
            await querying
            lent.release()
            assert.equal(readiness.statusCode, 503, readiness.body)
            refusals([readiness], code, retryAfter)
            // The connection back, the pool answers readiness again.
            assert.equal((await testApp.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
          } finally {
            await pool?.close()
            await testApp.close()
          }
        })
      }
    }

    it(`answers the waiters 503 unavailable once the database has answered nothing for a second, readiness ${withStandbys ? '200 (the standbys serve reads throughout)' : 'too'}, and serves again after`, async () => {
      const metrics = createMetrics({ processMetrics: false })
      const testApp = await buildTestApp(engine, { env: POOL_ONE, metrics })
      try {
        const key = await testApp.createKey()
        const unkeyed = (name: string) => postPet(testApp, key, JSON.stringify({ name, categoryId: 1 }))
        const made = await unkeyed('before')
        assert.equal(made.statusCode, 201, made.body)
        const petUrl = `/v1/pets/${(JSON.parse(made.body) as { id: number }).id}`
        let first: Promise<LightMyRequestResponse> | undefined
        let waiters: Promise<LightMyRequestResponse[]> | undefined
        const reads: Promise<LightMyRequestResponse>[] = []
        await withSession(testApp, async (client) => {
          // SHARE: creates wait for it, reads do not, and standbys never see it (only ACCESS EXCLUSIVE is replayed).
          // Held until the waiters are answered, however long the machine takes to send them.
          let answered: (value?: unknown) => void = () => {}
          const held = lockUntil(client, new Promise((resolve) => (answered = resolve)), 'SHARE')
          await sleep(100)
          // Lent the pool's one connection, which then waits for the lock: nothing answers from here on.
          // Unkeyed, so that no lock_timeout of its own ends its wait.
          first = unkeyed('first')
          // With standbys, reads go on there all along, and their answers must not count as the primary's.
          let reading = withStandbys
          const readingDone = (async () => {
            while (reading) {
              reads.push(testApp.request(key, { method: 'GET', url: petUrl }))
              await sleep(100)
            }
          })()
          await sleep(1_500)
          waiters = Promise.all([...Array.from({ length: 5 }, (_, i) => unkeyed(`waiter ${i}`)), testApp.app.inject({ method: 'GET', url: '/readyz' })])
          await waiters
          answered()
          await held
          reading = false
          await readingDone
        })
        const answers = (await waiters) ?? []
        const readiness = answers.pop()
        assert.deepEqual(answers.map((answer) => answer.statusCode), [503, 503, 503, 503, 503])
        refusals(answers, 'unavailable', '5')
        if (withStandbys) assert.equal(readiness?.statusCode, 200, readiness?.body)
        else refusals(readiness === undefined ? [] : [readiness], 'unavailable', '5')
        assert.deepEqual(new Set((await Promise.all(reads)).map((read) => read.statusCode)), new Set(withStandbys ? [200] : []))
        assert.equal(await series(metrics, 'petstore_db_unavailable_total'), 5)
        assert.equal(await series(metrics, 'petstore_overload_rejections_total{reason="database-pool"}'), 0)
        // The lock gone, the one that held the connection is served, and so is what comes next.
        assert.equal((await first)?.statusCode, 201)
        assert.equal((await create(testApp, key, 'after')).statusCode, 201)
        assert.equal((await testApp.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
      } finally {
        await testApp.close()
      }
    })
  })
}
