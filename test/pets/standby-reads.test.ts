import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import pg from 'pg'
import { decodeCursor, encodeCursor } from '../../src/pets/pets.cursor.js'
import { CONTRACT_ENGINES, type TestApp, buildTestApp, errorBody, postPet, standbyServers, useTestApp } from '../helper.js'

// Where reads go with standbys (docs/decisions/0023-read-replicas.md), on the standbys test/run.ts starts: a
// synchronous one and one replaying each commit 2 s late, past DATABASE_REPLICA_MAX_LAG_MS (1 s).

interface Pet {
  id: number
}

describe('cursors with the position their page was read at', () => {
  it('reads a p1 cursor, issued before standbys, as a position nowhere', () => {
    assert.deepEqual(decodeCursor(encodeCursor(41n, 'sold'), 'sold'), { afterId: 41n, atLeast: undefined })
    assert.equal(Buffer.from(encodeCursor(41n, 'sold'), 'base64url').toString(), 'p1:sold:41')
  })

  it('writes p2 with the position, and reads it back', () => {
    const cursor = encodeCursor(41n, undefined, 123456789n)
    assert.equal(Buffer.from(cursor, 'base64url').toString(), 'p2::41:123456789')
    assert.deepEqual(decodeCursor(cursor, undefined), { afterId: 41n, atLeast: 123456789n })
  })

  it('refuses a p2 cursor with a position beyond int64, a sign, a leading zero or none', () => {
    for (const text of ['p2::41:9223372036854775808', 'p2::41:-1', 'p2::41:01', 'p2::41:', 'p2::41', 'p1::41:5']) {
      assert.throws(() => decodeCursor(Buffer.from(text).toString('base64url'), undefined), /'cursor' is not one this service issued/, text)
    }
  })
})

const replicaEngines = CONTRACT_ENGINES.filter((engine) => engine.startsWith('standbys'))

for (const engine of replicaEngines) {
  describe(`reads on ${engine}`, () => {
    const fx = useTestApp(engine, { env: { RATE_LIMIT_PER_KEY: '0' } })
    const reads = (testApp: TestApp) => testApp.storage.replicaStats?.().reads

    async function create(testApp: TestApp, key: string, count: number): Promise<Pet[]> {
      const pets: Pet[] = []
      for (let i = 0; i < count; i++) {
        const response = await postPet(testApp, key, `{"name":"Pet ${i}","categoryId":1}`)
        assert.equal(response.statusCode, 201, response.body)
        pets.push(JSON.parse(response.body) as Pet)
      }
      return pets
    }

    /** Until the app's synchronous standby may serve reads (its first poll, and the new database replayed there). */
    async function standbyUsable(testApp: TestApp): Promise<void> {
      for (let i = 0; testApp.storage.replicaStats?.().replicas[0]?.usable !== true; i++) {
        assert.ok(i < 100, `the standby never became usable: ${JSON.stringify(testApp.storage.replicaStats?.().replicas)}`)
        await sleep(50)
      }
    }

    it('answers full, settled pages and found pets from a standby, and each next page carries where the last was read', async () => {
      const { testApp, key } = fx
      const pets = await create(testApp, key, 12)
      await standbyUsable(testApp)
      const before = structuredClone(reads(testApp))
      const page = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=5' })
      assert.equal(page.statusCode, 200)
      const cursor = new URL(/<([^>]*)>/.exec(String(page.headers.link))?.[1] ?? '').searchParams.get('cursor') ?? ''
      assert.match(Buffer.from(cursor, 'base64url').toString(), /^p2::\d+:[1-9]\d*$/)
      const found = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pets[0]?.id}` })
      assert.equal(found.statusCode, 200)
      const after = reads(testApp)
      assert.equal(after?.page.replica, (before?.page.replica ?? 0) + 1, JSON.stringify(after))
      assert.equal(after?.pet.replica, (before?.pet.replica ?? 0) + 1, JSON.stringify(after))
      // Keys are looked up on the primary while it answers: a revocation counts at once.
      assert.equal(after?.key.replica, 0)
    })

    it('reads the last page on the primary, so that a walk ends with every pet acknowledged before it', async () => {
      const { testApp, key } = fx
      const before = structuredClone(reads(testApp))
      const last = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })
      assert.equal(last.statusCode, 200)
      assert.equal(last.headers.link, undefined)
      assert.equal(reads(testApp)?.page.primary, (before?.page.primary ?? 0) + 1)
    })

    it('walks with a p1 cursor issued before standbys, and with a p2 cursor whose position no server reached, the same pets', async () => {
      const { testApp, key } = fx
      const expected = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=3&cursor=' + encodeCursor(2n, undefined) })
      const ahead = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=3&cursor=' + encodeCursor(2n, undefined, 9_000_000_000_000_000_000n) })
      assert.equal(expected.statusCode, 200)
      assert.equal(ahead.statusCode, 200)
      assert.deepEqual(
        (JSON.parse(ahead.body) as Pet[]).map((pet) => pet.id),
        (JSON.parse(expected.body) as Pet[]).map((pet) => pet.id),
      )
      assert.equal(errorBody(await testApp.request(key, { method: 'GET', url: '/v1/pets?cursor=' + encodeCursor(2n, 'sold', 5n) })).code, 'invalid_request')
    })

    it('asks the primary for a pet the standby misses, never answering 404 for one acknowledged, and stops using a standby that falls behind', async (t) => {
      const { testApp, key } = fx
      const servers = standbyServers()
      assert.ok(servers !== undefined)
      // The synchronous standby itself: its pooler keeps no session, so replay is paused on the server.
      const standby = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${servers.ports[1]}/postgres` })
      await standby.connect()
      t.after(async () => {
        await standby.query('SELECT pg_wal_replay_resume()')
        await standby.end()
      })
      await standbyUsable(testApp)
      await standby.query('SELECT pg_wal_replay_pause()')
      const before = structuredClone(reads(testApp))
      const [pet] = await create(testApp, key, 1)
      const got = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pet?.id}` })
      assert.equal(got.statusCode, 200, got.body)
      assert.equal(reads(testApp)?.pet.primary, (before?.pet.primary ?? 0) + 1, 'the pet was not asked of the primary')
      // Writes go on while replay stays paused: once behind by more than 1 s, the standby serves nothing.
      for (let i = 0; testApp.storage.replicaStats?.().replicas[0]?.usable !== false; i++) {
        assert.ok(i < 60, `the paused standby was still usable: ${JSON.stringify(testApp.storage.replicaStats?.().replicas)}`)
        await create(testApp, key, 1)
        await sleep(50)
      }
      assert.ok((testApp.storage.replicaStats?.().replicas[0]?.lagSeconds ?? 0) > 1)
      const usedBefore = structuredClone(reads(testApp))
      assert.equal((await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=2' })).statusCode, 200)
      assert.equal(reads(testApp)?.page.replica, usedBefore?.page.replica, 'a page was read on a standby past the bound')
      await standby.query('SELECT pg_wal_replay_resume()')
      await standbyUsable(testApp)
    })
  })
}

describe('a standby that refuses the service', { skip: replicaEngines.length === 0 && 'the standbys are not started in this run' }, () => {
  it('serves every read from the primary, and says once which standby refuses and why, without its password', async (t) => {
    const servers = standbyServers()
    assert.ok(servers !== undefined)
    const refusing = `postgres://postgres:hunter2@127.0.0.1:${servers.ports[1]}/no_such_database`
    const testApp = await buildTestApp('standbys', { env: { DATABASE_REPLICA_URLS: refusing } })
    t.after(() => testApp.close())
    const key = await testApp.createKey()
    const created = await postPet(testApp, key, '{"name":"Rex","categoryId":1}')
    assert.equal(created.statusCode, 201)
    const warnings = () => testApp.logs.filter((line) => String(line.msg).includes('DATABASE_REPLICA_URLS refuses'))
    for (let i = 0; warnings().length === 0; i++) {
      assert.ok(i < 100, 'no warning about the refusing standby')
      await sleep(50)
    }
    const got = await testApp.request(key, { method: 'GET', url: `/v1/pets/${(JSON.parse(created.body) as Pet).id}` })
    assert.equal(got.statusCode, 200)
    await sleep(1_000)
    assert.equal(warnings().length, 1, JSON.stringify(warnings()))
    const [warning] = warnings()
    assert.equal(warning?.level, 40)
    assert.match(String(warning?.msg), new RegExp(`The standby 127\\.0\\.0\\.1:${servers.ports[1]}/no_such_database .*no_such_database" does not exist`))
    assert.doesNotMatch(JSON.stringify(testApp.logs), /hunter2/)
    assert.equal(testApp.storage.replicaStats?.().reads.pet.replica, 0)
  })
})
