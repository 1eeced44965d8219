import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import { createRepresentationCache, representation } from '../src/http/representation-cache.js'
import { SQLITE_LIST_BY_STATUS } from '../src/pets/pets.repository.sqlite.js'
import type { Storage } from '../src/storage/storage.js'
import { ENGINES, type TestApp, buildTestApp, postPet } from './helper.js'

/** Storage whose pet reads are counted, to see which answers came from the cache. */
function countingReads(storage: Storage, reads: { count: number }): Storage {
  const pets = storage.pets
  const counted = Object.create(pets) as typeof pets
  counted.list = (query) => {
    reads.count++
    return pets.list(query)
  }
  counted.findById = (id) => {
    reads.count++
    return pets.findById(id)
  }
  return new Proxy(storage, { get: (target, name): unknown => (name === 'pets' ? counted : Reflect.get(target, name)) })
}

describe('representation cache', () => {
  it('keeps at most its byte budget, dropping the oldest answers first, and forgets all on a new version', async () => {
    let version = 1
    let builds = 0
    const cache = createRepresentationCache(() => version, 10)
    const get = (key: string) =>
      cache.get(key, async () => {
        builds++
        return representation(key.repeat(4))
      })
    await get('a')
    await get('b')
    await get('a')
    assert.equal(builds, 2)
    await get('c') // 12 bytes > 10: 'a' goes
    await get('b')
    assert.equal(builds, 3)
    await get('a')
    assert.equal(builds, 4)
    version++
    await get('a')
    assert.equal(builds, 5)
    // An answer larger than the whole budget is served, never kept.
    await get('z'.repeat(5))
    await get('z'.repeat(5))
    assert.equal(builds, 7)
  })

  it('caches nothing without a version', async () => {
    let builds = 0
    const cache = createRepresentationCache(undefined)
    for (let i = 0; i < 3; i++) await cache.get('k', async () => representation(String(++builds)))
    assert.equal(builds, 3)
  })
})

describe('read answers cached exactly on sqlite', () => {
  const reads = { count: 0 }
  let testApp: TestApp
  let key: string
  let file: string
  before(async () => {
    testApp = await buildTestApp('sqlite', { storage: (storage) => countingReads(storage, reads) })
    key = await testApp.createKey()
    file = testApp.config.database.engine === 'sqlite' ? testApp.config.database.path : ''
  })
  after(() => testApp.close())

  const list = async (url = '/v1/pets?limit=100') => {
    const response = await testApp.request(key, { method: 'GET', url })
    assert.equal(response.statusCode, 200)
    return response
  }

  it('answers a repeated read from the cache, with the same bytes and ETag', async () => {
    await postPet(testApp, key, '{"name":"Rex","categoryId":1,"status":"available"}')
    const first = await list()
    const count = reads.count
    const second = await list()
    assert.equal(reads.count, count, 'the second read went to the database')
    assert.equal(second.body, first.body)
    assert.equal(second.headers.etag, first.headers.etag)
  })

  it("sees this process's own create on the next read", async () => {
    const before = JSON.parse((await list()).body) as unknown[]
    await postPet(testApp, key, '{"name":"Tom","categoryId":2}')
    assert.equal((JSON.parse((await list()).body) as unknown[]).length, before.length + 1)
  })

  it('sees a pet another connection (any process) commits, on the very next read', async (t) => {
    const pet = JSON.parse((await postPet(testApp, key, '{"name":"Kit","categoryId":3,"status":"sold"}')).body) as { id: number }
    const cached = await list(`/v1/pets/${pet.id}`)
    const other = new Sqlite(file)
    t.after(() => other.close())
    other.prepare("UPDATE pets SET name = 'Renamed elsewhere' WHERE id = ?").run(pet.id)
    other.prepare("INSERT INTO pets (name, category_id, status, created_at) VALUES ('Outsider', 9, 'sold', 0)").run()
    // A request sent after that commit reaches the server in a later turn of its event loop.
    await new Promise((resolve) => setImmediate(resolve))
    const fresh = await list(`/v1/pets/${pet.id}`)
    assert.match(fresh.body, /Renamed elsewhere/)
    assert.notEqual(fresh.headers.etag, cached.headers.etag)
    assert.match((await list('/v1/pets?status=sold')).body, /Outsider/)
  })

  it('does not cache errors', async () => {
    const count = reads.count
    for (let i = 0; i < 2; i++) {
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets/424242' })
      assert.equal(response.statusCode, 404)
    }
    assert.equal(reads.count, count + 2)
  })
})

for (const engine of ENGINES) {
  describe(`concurrent creates on ${engine}`, () => {
    let testApp: TestApp
    let key: string
    before(async () => {
      testApp = await buildTestApp(engine)
      key = await testApp.createKey()
    })
    after(() => testApp.close())

    it('gives 200 simultaneous creates 200 distinct ids, each one listed afterwards', async () => {
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, i) => postPet(testApp, key, JSON.stringify({ name: `Pet ${i}`, categoryId: i + 1 }))),
      )
      assert.deepEqual(new Set(responses.map((r) => r.statusCode)), new Set([201]))
      const ids = responses.map((r) => (JSON.parse(r.body) as { id: number }).id)
      assert.equal(new Set(ids).size, 200)
      const listed: number[] = []
      for (const cursorUrl of ['/v1/pets?limit=100']) {
        let next: string | undefined = cursorUrl
        while (next !== undefined) {
          const page = await testApp.request(key, { method: 'GET', url: next })
          listed.push(...(JSON.parse(page.body) as { id: number }[]).map((pet) => pet.id))
          next = /<([^>]*)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1]?.slice(testApp.config.publicBaseUrl.length)
        }
      }
      assert.deepEqual(listed, [...ids].sort((a, b) => a - b))
    })
  })
}

describe('the status filter walks the (status, id) index in id order', () => {
  it('on sqlite: EXPLAIN QUERY PLAN searches pets_status_id and sorts nothing', async (t) => {
    const testApp = await buildTestApp('sqlite')
    t.after(() => testApp.close())
    const db = new Sqlite(testApp.config.database.engine === 'sqlite' ? testApp.config.database.path : '', { readonly: true })
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${SQLITE_LIST_BY_STATUS}`).all('sold', 0, 21) as { detail: string }[])
      .map((row) => row.detail)
      .join('\n')
    db.close()
    assert.match(plan, /SEARCH pets USING INDEX pets_status_id \(status=\? AND id>\?\)/)
    assert.doesNotMatch(plan, /TEMP B-TREE/)
  })

  // On postgres the page reads run inside pets_page(): test/postgres-pages.test.ts checks their plans.
})
