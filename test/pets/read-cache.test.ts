import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import {
  ENTRY_OVERHEAD_BYTES,
  FINAL_RECHECK_MS,
  MAX_RECENT_KEYS,
  REWRITES_CONFIRM_MS,
  type Representation,
  createRepresentationCache,
  entryCost,
  representation,
} from '../../src/pets/pets.representation-cache.js'
import { encodeCursor } from '../../src/pets/pets.cursor.js'
import { SQLITE_LIST_BY_STATUS } from '../../src/pets/pets.repository.sqlite.js'
import { PETS_REPOSITORY_METHODS } from '../../src/pets/pets.routes.js'
import type { Storage } from '../../src/repositories.js'
import { ENGINES, ManualClock, type TestApp, buildTestApp, postPet } from '../helper.js'

/** What countingReads counts: the pet reads, and the count of rewrites last asked (PetsRepository.rewrites). */
interface Reads {
  count: number
  rewritesAsked?: Promise<unknown>
}

/** Storage whose pet reads are counted, to see which answers came from the cache. */
function countingReads(storage: Storage, reads: Reads): Storage {
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
  const rewrites = pets.rewrites?.bind(pets)
  if (rewrites !== undefined) {
    counted.rewrites = () => {
      const asked = rewrites()
      reads.rewritesAsked = asked
      return asked
    }
  }
  return new Proxy(storage, { get: (target, name): unknown => (name === 'pets' ? counted : Reflect.get(target, name)) })
}

describe('representation cache', () => {
  const built = (answer: Representation, final = false) => ({ answer, final })

  it('with a version: keeps at most its byte budget, dropping the oldest answers first, and forgets all on a new version', async () => {
    let version = 1
    let builds = 0
    // Room for two answers of one key's form, not three.
    const cache = createRepresentationCache({ version: () => version, clock: new ManualClock(), maxBytes: 2 * entryCost('a', representation('aaaa')) })
    const get = (key: string) =>
      cache.get(key, async () => {
        builds++
        return built(representation(key.repeat(4)))
      })
    await get('a')
    await get('b')
    await get('a')
    assert.equal(builds, 2)
    await get('c') // three answers' cost is over the budget: 'a' goes
    await get('b')
    assert.equal(builds, 3)
    await get('a')
    assert.equal(builds, 4)
    version++
    await get('a')
    assert.equal(builds, 5)
    // An answer larger than the whole budget is served, never kept, and the others stay.
    await get('z'.repeat(400))
    await get('z'.repeat(400))
    assert.equal(builds, 7)
    await get('a')
    assert.equal(builds, 7)
  })

  it('with a version: a final answer asks it at most once a FINAL_RECHECK_MS, an answer that is not final at every read', async () => {
    const clock = new ManualClock()
    let version = 1
    let asked = 0
    let builds = 0
    const cache = createRepresentationCache({
      version: () => {
        asked++
        return version
      },
      clock,
    })
    const get = (key: string, final: boolean) =>
      cache.get(key, async () => {
        builds++
        return built(representation(key), final)
      })
    await get('pet', true)
    const afterFirst = asked
    for (let i = 0; i < 5; i++) await get('pet', true)
    assert.equal(asked, afterFirst, 'a final hit within the second asked the version')
    assert.equal(builds, 1)
    await get('last page', false)
    await get('last page', false)
    assert.equal(asked, afterFirst + 3, 'an answer that is not final asks at every read (twice for a read that builds)')
    // A change outside the API (the version moves with no write of ours) reaches the final answer once
    // FINAL_RECHECK_MS has passed since the version was last asked, and not before.
    version++
    clock.advance(FINAL_RECHECK_MS - 1)
    await get('pet', true)
    assert.equal(builds, 2, 'served from memory within the second')
    clock.advance(1)
    await get('pet', true)
    assert.equal(builds, 3, 'read again once FINAL_RECHECK_MS had passed')
    // A read that is not final sees a move at once, and forgets the final answers with the rest.
    await get('pet', true)
    version++
    await get('last page', false)
    await get('pet', true)
    assert.equal(builds, 5)
  })

  it('without a version: keeps only final answers whose key comes back, each read again once FINAL_RECHECK_MS has passed', async () => {
    const clock = new ManualClock()
    const cache = createRepresentationCache({ version: undefined, clock, maxBytes: 2 * entryCost('aaaa', representation('aaaa12')) })
    let builds = 0
    let final = true
    const get = (key: string) =>
      cache.get(key, async () => {
        builds++
        return built(representation(`${key}${builds}`), final)
      })
    // Read once: only the key is remembered. Read again within the second: kept.
    await get('k')
    const kept = await get('k')
    assert.equal(await get('k'), kept)
    assert.equal(builds, 2)
    clock.advance(FINAL_RECHECK_MS - 1)
    assert.equal(await get('k'), kept)
    assert.equal(builds, 2)
    clock.advance(1)
    const second = await get('k')
    assert.equal(builds, 3)
    assert.notEqual(second.body, kept.body)
    assert.equal(await get('k'), second, 'an answer read again is kept again')
    // A clock set back is not trusted to say the answer is recent.
    clock.advance(-1)
    await get('k')
    assert.equal(builds, 4)
    // A key that does not come back within about a second is never kept: a scan keeps no answers.
    for (const key of ['s1', 's2']) {
      await get(key)
      clock.advance(2 * FINAL_RECHECK_MS)
      await get(key)
    }
    assert.equal(builds, 8, 'a key read again after two seconds was kept')
    // Read once more within the second: now it came back, and is kept.
    await get('s2')
    await get('s2')
    assert.equal(builds, 9)
    // An answer that a write could change is never kept, and replaces what was kept under its key.
    final = false
    clock.advance(FINAL_RECHECK_MS)
    await get('k')
    await get('k')
    assert.equal(builds, 11)
    // The budget holds here too: two answers such as 'aaaa12' fit, the oldest goes first.
    final = true
    for (const key of ['aaaa', 'bbbb', 'aaaa', 'bbbb', 'cccc', 'cccc']) await get(key)
    assert.equal(builds, 17)
    await get('bbbb')
    assert.equal(builds, 17)
    await get('aaaa')
    assert.equal(builds, 18)
  })

  it('without a version: a key that comes back only after its answer would expire keeps nothing, and an answer never served is not kept again', async () => {
    const clock = new ManualClock()
    const cache = createRepresentationCache({ version: undefined, clock })
    const builds = new Map<string, number>()
    const get = (key: string) =>
      cache.get(key, async () => {
        builds.set(key, (builds.get(key) ?? 0) + 1)
        return built(representation(key), true)
      })
    const kept = () => cache.size().entries
    // A walk whose period is just over FINAL_RECHECK_MS, within the two seconds of keys remembered: every
    // visit reads, and nothing is kept to be dropped unread.
    for (const period of [FINAL_RECHECK_MS + 1, 1.2 * FINAL_RECHECK_MS, 1.9 * FINAL_RECHECK_MS]) {
      const key = `slow ${period}`
      for (let visit = 0; visit < 6; visit++) {
        await get(key)
        assert.equal(kept(), 0, `a key coming back every ${period} ms was kept at visit ${visit}`)
        clock.advance(period)
      }
      assert.equal(builds.get(key), 6)
    }
    // Kept once it came back within FINAL_RECHECK_MS; expired unread, it is read and dropped, and kept
    // again only when its key comes back in time again.
    const period = FINAL_RECHECK_MS / 2
    await get('k')
    clock.advance(period)
    await get('k')
    assert.equal(kept(), 1)
    clock.advance(FINAL_RECHECK_MS + 100)
    await get('k')
    assert.equal(kept(), 0, 'an answer never served was kept again')
    clock.advance(period)
    await get('k')
    assert.equal(kept(), 1, 'a key that came back in time again was not kept')
    // Served while kept: kept again, visit after visit, each read once FINAL_RECHECK_MS has passed.
    for (let visit = 0; visit < 6; visit++) {
      clock.advance(period)
      await get('k')
      assert.equal(kept(), 1, `a served answer was dropped at visit ${visit}`)
    }
    assert.equal(builds.get('k'), 4 + 3, 'each answer was served once, then read again')
  })

  it('with a count of rewrites: a counted answer is kept from its first read, confirmed by one count a REWRITES_CONFIRM_MS, and read again when it moves or cannot be asked', async () => {
    const clock = new ManualClock()
    let count = 5
    let down = false
    let asked = 0
    const cache = createRepresentationCache({
      version: undefined,
      clock,
      rewrites: async () => {
        asked++
        if (down) throw new Error('the database is gone')
        return count
      },
    })
    let builds = 0
    const get = (key: string, counted = true) =>
      cache.get(key, async () => {
        builds++
        return counted ? { answer: representation(`${key} ${count}`), final: true, count } : built(representation(key), true)
      })
    const settled = () => new Promise((resolve) => setImmediate(resolve))
    // Kept from its first read, where an answer without a count must come back first.
    await get('pet')
    await settled()
    assert.equal((await get('pet')).body, 'pet 5')
    assert.equal(builds, 1)
    await get('uncounted', false)
    await get('uncounted', false)
    assert.equal(builds, 3)
    // Read every REWRITES_CONFIRM_MS: confirmed each time, so served from memory for good, by one count
    // for every counted answer, however many are read.
    for (let step = 0; step < 10; step++) {
      clock.advance(REWRITES_CONFIRM_MS)
      for (const key of ['pet', 'pet', 'other']) await get(key)
      await settled()
    }
    assert.equal(builds, 4, 'a confirmed answer was read again')
    assert.ok(asked <= 11, `the count was asked ${asked} times in ${10 * REWRITES_CONFIRM_MS} ms`)
    // A rewrite: seen once a count asked after it, within FINAL_RECHECK_MS, says so; never later.
    count = 6
    clock.advance(FINAL_RECHECK_MS - 1)
    assert.equal((await get('pet')).body, 'pet 5', 'no count asked since the rewrite: still current')
    await settled()
    assert.equal((await get('pet')).body, 'pet 6', 'the count moved, and the answer was served')
    await settled()
    // The count cannot be asked: confirmed by nothing, each answer is read again FINAL_RECHECK_MS after its read or last count.
    down = true
    clock.advance(FINAL_RECHECK_MS - 1)
    assert.equal((await get('pet')).body, 'pet 6')
    await settled()
    const before: number = builds
    clock.advance(1)
    await get('pet')
    assert.equal(builds, before + 1, 'served from memory past FINAL_RECHECK_MS with no count asked')
    await settled()
    clock.advance(FINAL_RECHECK_MS / 2)
    await get('pet')
    assert.equal(builds, before + 1, 'its own read keeps it FINAL_RECHECK_MS')
    // Back: confirmed again from the next read on.
    down = false
    clock.advance(FINAL_RECHECK_MS / 2 - 1)
    await get('pet')
    await settled()
    clock.advance(FINAL_RECHECK_MS - 1)
    await get('pet')
    assert.equal(builds, before + 1)
  })
})

describe('forged cursors against the representation cache', () => {
  const FORGED = 100_000
  const BUDGET = 8 * 1024 * 1024
  // What a forged cursor gets: an empty page, final or not, that the cache may keep.
  const empty = representation('[]')
  const emptyPage = () => Promise.resolve({ answer: empty, final: true })
  const forged = (n: number) => `list 20  ${encodeCursor(BigInt(1_000_000_000 + n), undefined)}`

  it(`with a version: ${FORGED.toLocaleString('en')} distinct cursors keep it within its budget, at most budget / ${ENTRY_OVERHEAD_BYTES} entries`, async () => {
    const cache = createRepresentationCache({ version: () => 1, clock: new ManualClock(), maxBytes: BUDGET })
    for (let n = 0; n < FORGED; n++) await cache.get(forged(n), emptyPage)
    const { entries, bytes } = cache.size()
    assert.ok(bytes <= BUDGET, `${bytes} bytes accounted`)
    assert.ok(entries <= Math.floor(BUDGET / ENTRY_OVERHEAD_BYTES), `${entries} entries`)
    // Full, and each entry counted at its whole cost: a key, an ETag and the overhead, not 2 bytes of body.
    assert.equal(bytes, entries * entryCost(forged(0), empty))
    assert.ok(bytes > BUDGET - entryCost(forged(0), empty))
  })

  it(`without a version: ${FORGED.toLocaleString('en')} distinct cursors in one second remember at most ${MAX_RECENT_KEYS} keys, and keep nothing`, async () => {
    const clock = new ManualClock()
    const cache = createRepresentationCache({ version: undefined, clock, maxBytes: BUDGET })
    for (let n = 0; n < FORGED; n++) await cache.get(forged(n), emptyPage)
    assert.deepEqual(cache.size(), { entries: 0, bytes: 0, recentKeys: MAX_RECENT_KEYS })
    // The same flood again within the second: the keys it remembered come back and are kept, within the budget.
    for (let n = 0; n < FORGED; n++) await cache.get(forged(n), emptyPage)
    const { entries, bytes, recentKeys } = cache.size()
    assert.equal(recentKeys, MAX_RECENT_KEYS)
    assert.ok(entries <= MAX_RECENT_KEYS && bytes <= BUDGET, JSON.stringify(cache.size()))
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

  it('sees a pet another connection (any process) commits on the very next read, and a change outside the API within FINAL_RECHECK_MS', async (t) => {
    const pet = JSON.parse((await postPet(testApp, key, '{"name":"Kit","categoryId":3,"status":"sold"}')).body) as { id: number }
    const cached = await list(`/v1/pets/${pet.id}`)
    const other = new Sqlite(file)
    t.after(() => other.close())
    const rename = (name: string) => other.prepare('UPDATE pets SET name = ? WHERE id = ?').run(name, pet.id)
    // A request sent after a commit reaches the server in a later turn of its event loop.
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve))
    rename('Renamed elsewhere')
    other.prepare("INSERT INTO pets (name, category_id, status, created_at) VALUES ('Outsider', 9, 'sold', 0)").run()
    await nextTurn()
    // No write through the API changes a pet once found: its answer asks the version at most once a second.
    assert.equal((await list(`/v1/pets/${pet.id}`)).body, cached.body)
    // A page that creates can change asks at every read, and a move forgets every answer.
    assert.match((await list('/v1/pets?status=sold')).body, /Outsider/)
    const fresh = await list(`/v1/pets/${pet.id}`)
    assert.match(fresh.body, /Renamed elsewhere/)
    assert.notEqual(fresh.headers.etag, cached.headers.etag)
    // Where only final answers are read, a change outside the API reaches them once FINAL_RECHECK_MS has passed.
    rename('Renamed again')
    await nextTurn()
    assert.match((await list(`/v1/pets/${pet.id}`)).body, /Renamed elsewhere/)
    testApp.clock.advance(FINAL_RECHECK_MS)
    assert.match((await list(`/v1/pets/${pet.id}`)).body, /Renamed again/)
  })

  it('does not cache errors', async () => {
    const count = reads.count
    for (let i = 0; i < 2; i++) {
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets/424242' })
      assert.equal(response.statusCode, 404)
    }
    assert.equal(reads.count, count + 2)
  })

  // Last here: a pet at the largest id leaves no id for a create.
  it('keeps each pet under its own key, on both sides of 2^53, where neighbours share a nearest number', async (t) => {
    const other = new Sqlite(file)
    t.after(() => other.close())
    const ids = ['999999999999999', '1000000000000000', '9007199254740992', '9007199254740993', '9223372036854775806', '9223372036854775807']
    const insert = other.prepare("INSERT INTO pets (id, name, category_id, status, created_at) VALUES (?, ?, 1, 'available', 0)")
    for (const id of ids) insert.run(BigInt(id), `Pet ${id}`)
    const get = async (id: string) => (await list(`/v1/pets/${id}`)).body
    const expected = (id: string) => `{"id":${id},"name":"Pet ${id}","categoryId":1,"status":"available"}`
    for (const id of ids) assert.equal(await get(id), expected(id))
    const count = reads.count
    for (const id of [...ids].reverse()) assert.equal(await get(id), expected(id))
    assert.equal(reads.count, count, 'a second read went to the database')
  })
})

describe('read answers on postgres: what no API write can change is kept', { skip: !ENGINES.includes('postgres') && 'needs PostgreSQL' }, () => {
  const reads: Reads = { count: 0 }
  let testApp: TestApp
  let key: string
  let ids: number[]
  before(async () => {
    testApp = await buildTestApp('postgres', { storage: (storage) => countingReads(storage, reads) })
    key = await testApp.createKey()
    ids = []
    for (const name of ['Rex', 'Tom', 'Kit']) {
      ids.push((JSON.parse((await postPet(testApp, key, JSON.stringify({ name, categoryId: 1 }))).body) as { id: number }).id)
    }
  })
  after(() => testApp.close())

  const get = async (url: string) => {
    const response = await testApp.request(key, { method: 'GET', url })
    assert.equal(response.statusCode, 200)
    return response
  }
  const nextUrl = (response: Awaited<ReturnType<typeof get>>) =>
    /<([^>]*)>; rel="next"/.exec(String(response.headers.link ?? ''))?.[1]?.slice(testApp.config.publicBaseUrl.length)

  it('answers a found pet from memory from its first read, a page that has a next page once asked twice, and reads the last page each time', async () => {
    await get('/v1/pets?limit=2')
    const first = await get('/v1/pets?limit=2')
    const count = reads.count
    const again = await get('/v1/pets?limit=2')
    assert.equal(reads.count, count, 'the full page went to the database again')
    assert.equal(again.body, first.body)
    assert.equal(again.headers.etag, first.headers.etag)
    const last = nextUrl(first)
    assert.ok(last !== undefined)
    await get(last)
    await get(last)
    assert.equal(reads.count, count + 2, 'the last page was served from memory')
    for (let i = 0; i < 3; i++) await get(`/v1/pets/${ids[0]}`)
    assert.equal(reads.count, count + 3)
  })

  it('keeps a full page through creates, which the last page shows at once', async () => {
    const first = await get('/v1/pets?limit=2')
    const last = nextUrl(first) ?? ''
    const created = (JSON.parse((await postPet(testApp, key, '{"name":"New","categoryId":2}')).body) as { id: number }).id
    const count = reads.count
    const again = await get('/v1/pets?limit=2')
    assert.equal(reads.count, count)
    assert.equal(again.headers.etag, first.headers.etag)
    assert.deepEqual(
      (JSON.parse((await get(last)).body) as { id: number }[]).map((pet) => pet.id),
      [ids[2], created],
    )
  })

  it('sees a change made outside the API (SQL by hand) once FINAL_RECHECK_MS has passed', async (t) => {
    const id = ids[0]
    await get(`/v1/pets/${id}`)
    const client = new pg.Client({ connectionString: testApp.config.database.engine === 'postgres' ? testApp.config.database.url : '' })
    await client.connect()
    t.after(() => client.end())
    await client.query("UPDATE pets SET name = 'Renamed by hand' WHERE id = $1", [id])
    assert.doesNotMatch((await get(`/v1/pets/${id}`)).body, /Renamed by hand/, 'kept for up to FINAL_RECHECK_MS')
    testApp.clock.advance(FINAL_RECHECK_MS)
    assert.match((await get(`/v1/pets/${id}`)).body, /Renamed by hand/)
    assert.match((await get('/v1/pets?limit=2')).body, /Renamed by hand/)
  })

  /** The count of rewrites that the last read asked for, answered, and the cache's handling of it done. */
  const countAnswered = async () => {
    await reads.rewritesAsked?.catch(() => {})
    await new Promise((resolve) => setImmediate(resolve))
  }

  // Last here: it removes every pet.
  it('keeps a found pet from memory while the count of rewrites stays, and sees an UPDATE (by a role that may not write the count), a DELETE and a TRUNCATE by hand as soon as a count is asked after them', async (t) => {
    const url = `/v1/pets/${ids[1]}`
    const client = new pg.Client({ connectionString: testApp.config.database.engine === 'postgres' ? testApp.config.database.url : '' })
    await client.connect()
    const editor = `petstore_editor_${process.pid}_${Date.now()}`
    t.after(async () => {
      await client.query(`DROP OWNED BY ${editor}`).catch(() => {})
      await client.query(`DROP ROLE IF EXISTS ${editor}`)
      await client.end()
    })
    await get(url)
    await countAnswered()
    const count = reads.count
    for (let step = 0; step < 8; step++) {
      testApp.clock.advance(REWRITES_CONFIRM_MS)
      await get(url)
      await countAnswered()
    }
    assert.equal(reads.count, count, `read again within ${8 * REWRITES_CONFIRM_MS} ms of confirmed counts`)
    // Each rewrite: the answer of before may still be served until a count asked after it comes back, and not after.
    const seenAfterCount = async (url: string) => {
      testApp.clock.advance(REWRITES_CONFIRM_MS)
      await testApp.request(key, { method: 'GET', url })
      await countAnswered()
      return testApp.request(key, { method: 'GET', url })
    }
    await client.query(`CREATE ROLE ${editor} NOLOGIN`)
    const { rows } = await client.query<{ schema: string }>('SELECT quote_ident(current_schema()) AS schema')
    await client.query(`GRANT USAGE ON SCHEMA ${rows[0]?.schema ?? 'public'} TO ${editor}`)
    await client.query(`GRANT SELECT, UPDATE ON pets TO ${editor}`)
    await client.query(`SET ROLE ${editor}`)
    await client.query("UPDATE pets SET name = 'Renamed by an editor' WHERE id = $1", [ids[1]])
    await client.query('RESET ROLE')
    assert.match((await seenAfterCount(url)).body, /Renamed by an editor/)
    await client.query('DELETE FROM pets WHERE id = $1', [ids[1]])
    assert.equal((await seenAfterCount(url)).statusCode, 404)
    const other = `/v1/pets/${ids[2]}`
    await get(other)
    await client.query('TRUNCATE pets CASCADE')
    assert.equal((await seenAfterCount(other)).statusCode, 404)
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

  // On postgres the page reads run inside pets_page(): test/pets/postgres-pages.test.ts checks their plans.
})

for (const engine of ENGINES) {
  describe(`the pets repository on ${engine}`, () => {
    let testApp: TestApp
    before(async () => {
      testApp = await buildTestApp(engine)
    })
    after(() => testApp.close())

    // The read cache keeps a found pet for good (pets.routes.ts): no way to change one may exist.
    it('can only create and read pets: it has no update or delete for the read cache to miss', () => {
      const methods = Object.keys(testApp.storage.pets)
      assert.deepEqual(methods.filter((name) => !PETS_REPOSITORY_METHODS.includes(name)), [])
    })
  })
}
