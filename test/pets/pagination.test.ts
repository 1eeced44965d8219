import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pg from 'pg'
import { insertPostgresPet } from '../../src/pets/pets.repository.postgres.js'
import { CONTRACT_ENGINES, ENGINES, type TestApp, buildTestApp, errorBody, postPet, useTestApp } from '../helper.js'

interface Pet {
  id: number
  status?: string
}

const STATUSES = ['available', 'pending', 'sold', undefined] as const

async function createPets(testApp: TestApp, key: string, count: number, status?: string): Promise<Pet[]> {
  const pets: Pet[] = []
  for (let i = 0; i < count; i++) {
    const response = await postPet(testApp, key, JSON.stringify({ name: `Pet ${i}`, categoryId: 1, status }))
    assert.equal(response.statusCode, 201, response.body)
    pets.push(JSON.parse(response.body) as Pet)
  }
  return pets
}

/** The `rel="next"` target of a Link header, if any. */
function nextLink(link: string | string[] | number | undefined): string | undefined {
  return /<([^>]*)>;\s*rel="next"/.exec(String(link ?? ''))?.[1]
}

/** Follows `rel="next"` from `url`, calling `between` after each page; returns every pet seen, in order. */
async function walk(testApp: TestApp, key: string, url: string, between: () => Promise<unknown> = async () => {}) {
  const seen: Pet[] = []
  let pages = 0
  for (let next: string | undefined = url; next !== undefined; pages++) {
    const response = await testApp.request(key, { method: 'GET', url: next })
    assert.equal(response.statusCode, 200, response.body)
    seen.push(...(JSON.parse(response.body) as Pet[]))
    const link = nextLink(response.headers.link)
    next = link === undefined ? undefined : link.slice(testApp.config.publicBaseUrl.length)
    await between()
  }
  return { seen, pages }
}

for (const engine of CONTRACT_ENGINES) {
  describe(`listPets pagination on ${engine}`, () => {
    const fx = useTestApp(engine)

    it('sends no Link when everything fits in one page', async () => {
      const { testApp, key } = fx
      await createPets(testApp, key, 3, 'pending')
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets?status=pending&limit=3' })
      assert.equal(response.statusCode, 200)
      assert.equal((JSON.parse(response.body) as Pet[]).length, 3)
      assert.equal(response.headers.link, undefined)
    })

    it('links the next page with the public base URL, the limit, the filter and an opaque cursor', async () => {
      const { testApp, key } = fx
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets?status=pending&limit=2' })
      assert.equal(response.statusCode, 200)
      const link = String(response.headers.link)
      assert.match(link, /^<[^>]+>; rel="next"$/)
      const url = new URL(nextLink(link) ?? '')
      assert.equal(url.origin + url.pathname, `${testApp.config.publicBaseUrl}/v1/pets`)
      assert.deepEqual([...url.searchParams.keys()], ['limit', 'status', 'cursor'])
      assert.equal(url.searchParams.get('limit'), '2')
      assert.equal(url.searchParams.get('status'), 'pending')
      assert.match(url.searchParams.get('cursor') ?? '', /^[A-Za-z0-9_-]+$/)
    })

    it('walks every pet exactly once, in id order, with and without a filter', async () => {
      const { testApp, key } = fx
      for (const status of STATUSES) await createPets(testApp, key, 3, status)
      const everything = JSON.parse(
        (await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })).body,
      ) as Pet[]
      for (const limit of [1, 2, 5, 100]) {
        const { seen, pages } = await walk(testApp, key, `/v1/pets?limit=${limit}`)
        assert.deepEqual(seen, everything, `limit=${limit}`)
        assert.equal(pages, Math.max(1, Math.ceil(everything.length / limit)), `pages at limit=${limit}`)
      }
      for (const status of ['available', 'pending', 'sold']) {
        const { seen } = await walk(testApp, key, `/v1/pets?status=${status}&limit=2`)
        assert.deepEqual(
          seen,
          everything.filter((pet) => pet.status === status),
          status,
        )
      }
    })

    it('has no next link on an exactly full last page', async () => {
      const { testApp, key } = fx
      const sold = JSON.parse((await testApp.request(key, { method: 'GET', url: '/v1/pets?status=sold&limit=100' })).body) as Pet[]
      const { pages } = await walk(testApp, key, `/v1/pets?status=sold&limit=${sold.length}`)
      assert.equal(pages, 1)
    })

    it('never repeats or skips a pet while pets are being created between pages', async () => {
      const { testApp, key } = fx
      const before = JSON.parse((await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })).body) as Pet[]
      const created: Pet[] = []
      const { seen } = await walk(testApp, key, '/v1/pets?limit=3', async () => {
        created.push(...(await createPets(testApp, key, 2, 'available')))
      })
      const ids = seen.map((pet) => pet.id)
      assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), 'strictly increasing, no repeats')
      for (const pet of before) assert.ok(ids.includes(pet.id), `pet ${pet.id} that existed before the walk was skipped`)
      // Pets created during the walk have greater ids, so the walk reaches them too, until it outruns them.
      assert.ok(created.some((pet) => ids.includes(pet.id)))
    })

    it('refuses a cursor used with another status filter, naming the filter it belongs to', async () => {
      const { testApp, key } = fx
      const first = await testApp.request(key, { method: 'GET', url: '/v1/pets?status=available&limit=1' })
      const cursor = new URL(nextLink(first.headers.link) ?? '').searchParams.get('cursor') ?? ''
      for (const url of [`/v1/pets?status=sold&cursor=${cursor}`, `/v1/pets?cursor=${cursor}`]) {
        const response = await testApp.request(key, { method: 'GET', url })
        assert.equal(response.statusCode, 400, url)
        const body = errorBody(response)
        assert.equal(body.code, 'invalid_request')
        assert.match(body.message, /'cursor' belongs to a listing with status=available/)
      }
      const unfiltered = await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=1' })
      const plain = new URL(nextLink(unfiltered.headers.link) ?? '').searchParams.get('cursor') ?? ''
      const response = await testApp.request(key, { method: 'GET', url: `/v1/pets?status=sold&cursor=${plain}` })
      assert.equal(response.statusCode, 400)
      assert.match(errorBody(response).message, /without a status filter/)
      // The same cursor with its own filter and any limit is fine.
      const ok = await testApp.request(key, { method: 'GET', url: `/v1/pets?status=available&limit=7&cursor=${cursor}` })
      assert.equal(ok.statusCode, 200)
    })

    it('refuses cursors it did not issue with 400 and a message naming cursor', async () => {
      const { testApp, key } = fx
      const forged = (text: string) => Buffer.from(text).toString('base64url')
      const bad = [
        'abc',
        forged('p1::0'),
        forged('p1::01'),
        forged('p1:lost:5'),
        forged('p2::5'),
        forged('p1::9223372036854775808'),
        `${forged('p1::5')}$`,
        'a'.repeat(65),
        '',
      ]
      for (const cursor of bad) {
        const response = await testApp.request(key, { method: 'GET', url: `/v1/pets?cursor=${encodeURIComponent(cursor)}` })
        assert.equal(response.statusCode, 400, cursor)
        assert.match(errorBody(response).message, /'cursor'/, cursor)
      }
      const repeated = await testApp.request(key, { method: 'GET', url: `/v1/pets?cursor=${forged('p1::1')}&cursor=${forged('p1::1')}` })
      assert.equal(repeated.statusCode, 400)
      // A well-formed cursor past the last id is simply an empty last page.
      const beyond = await testApp.request(key, { method: 'GET', url: `/v1/pets?cursor=${forged('p1::9223372036854775807')}` })
      assert.equal(beyond.statusCode, 200)
      assert.equal(beyond.body, '[]')
      assert.equal(beyond.headers.link, undefined)
    })
  })
}

if (ENGINES.includes('postgres')) {
  describe('listPets pagination on postgres with out-of-order commits', () => {
    it('waits for a create that drew a lower id to commit instead of skipping it', async (t) => {
      const testApp = await buildTestApp('postgres')
      const url = testApp.config.database.engine === 'postgres' ? testApp.config.database.url : ''
      const client = new pg.Client({ connectionString: url })
      // One hook, as the client must end before the app drops its database: t.after runs hooks in the order they were added.
      t.after(async () => {
        await client.end()
        await testApp.close()
      })
      const key = await testApp.createKey()
      await client.connect()
      // A create that has drawn its id but not committed yet (as a slow transaction would)...
      await client.query('BEGIN')
      const slow = await insertPostgresPet(client as unknown as pg.PoolClient, { name: 'Slow', categoryId: 1n }, 0)
      // ...and a later one, with a greater id, that commits first.
      const fastResponse = postPet(testApp, key, '{"name":"Fast","categoryId":1}')
      const listing = testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })
      await new Promise((resolve) => setTimeout(resolve, 200))
      await client.query('COMMIT')
      const fast = JSON.parse((await fastResponse).body) as Pet
      const listed = (JSON.parse((await listing).body) as Pet[]).map((pet) => BigInt(pet.id))
      assert.ok(BigInt(fast.id) > slow.id)
      // Whatever the page shows, it has no hole: the fast pet is never shown without the slow one.
      if (listed.includes(BigInt(fast.id))) assert.ok(listed.includes(slow.id), `page ${listed.join(',')} skips ${slow.id}`)
      const after = (JSON.parse((await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })).body) as Pet[]).map(
        (pet) => BigInt(pet.id),
      )
      assert.deepEqual(after, [slow.id, BigInt(fast.id)])
    })
  })
}
