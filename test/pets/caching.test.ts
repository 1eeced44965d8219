import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { matchesIfNoneMatch } from '../../src/pets/pets.conditional.js'
import { CONTRACT_ENGINES, errorBody, postPet, useTestApp } from '../helper.js'

describe('If-None-Match comparison', () => {
  it('matches weakly, in lists, and for *', () => {
    assert.equal(matchesIfNoneMatch('"abc"', '"abc"'), true)
    assert.equal(matchesIfNoneMatch('W/"abc"', '"abc"'), true)
    assert.equal(matchesIfNoneMatch('"x", W/"abc" ,"y"', '"abc"'), true)
    assert.equal(matchesIfNoneMatch('*', '"abc"'), true)
    assert.equal(matchesIfNoneMatch('"abcd"', '"abc"'), false)
    assert.equal(matchesIfNoneMatch('abc', '"abc"'), false)
    assert.equal(matchesIfNoneMatch(undefined, '"abc"'), false)
  })
})

for (const engine of CONTRACT_ENGINES) {
  describe(`conditional reads on ${engine}`, () => {
    const fx = useTestApp(engine)

    async function createPet(body = '{"name":"Rex","categoryId":3,"status":"available"}') {
      const response = await postPet(fx.testApp, fx.key, body)
      assert.equal(response.statusCode, 201)
      return JSON.parse(response.body) as { id: number }
    }

    it('answers getPet with an ETag and private caching, and 304 without a body when it matches', async () => {
      const { testApp, key } = fx
      const pet = await createPet()
      const first = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pet.id}` })
      assert.equal(first.statusCode, 200)
      const etag = String(first.headers.etag)
      assert.match(etag, /^"[A-Za-z0-9_-]{27}"$/)
      assert.equal(first.headers['cache-control'], 'private, no-cache')
      assert.equal(first.headers.vary, 'Authorization')

      for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pet.id}`, headers: { 'if-none-match': ifNoneMatch } })
        assert.equal(again.statusCode, 304, ifNoneMatch)
        assert.equal(again.body, '')
        assert.equal(again.headers.etag, etag)
        assert.equal(again.headers['cache-control'], 'private, no-cache')
        assert.equal(again.headers['content-type'], undefined)
        // The deprecation notice still reaches a client that only revalidates.
        assert.ok(again.headers.deprecation !== undefined && again.headers.sunset !== undefined)
      }
      const stale = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pet.id}`, headers: { 'if-none-match': '"stale"' } })
      assert.equal(stale.statusCode, 200)
      assert.equal(stale.body, first.body)
    })

    it('answers HEAD with a matching or * If-None-Match with the 304 GET gives, headers and all, on both reads', async () => {
      const { testApp, key } = fx
      const pet = await createPet()
      // Headers that differ from one answer to the next whatever the method.
      const VARYING = new Set(['date', 'x-request-id', 'ratelimit'])
      const comparable = (headers: Record<string, unknown>) => Object.entries(headers).filter(([name]) => !VARYING.has(name))
      for (const url of ['/v1/pets?limit=100', `/v1/pets/${pet.id}`]) {
        const etag = String((await testApp.request(key, { method: 'GET', url })).headers.etag)
        for (const ifNoneMatch of [etag, `W/${etag}`, '*', '"stale"']) {
          const headers = { 'if-none-match': ifNoneMatch }
          const get = await testApp.request(key, { method: 'GET', url, headers })
          const head = await testApp.request(key, { method: 'HEAD', url, headers })
          assert.equal(head.statusCode, get.statusCode, `${url} ${ifNoneMatch}: ${head.statusCode}`)
          assert.equal(head.statusCode, ifNoneMatch === '"stale"' ? 200 : 304)
          assert.equal(head.body, '')
          assert.deepEqual(comparable(head.headers), comparable(get.headers), `${url} ${ifNoneMatch}`)
        }
      }
    })

    it('gives different pets different ETags', async () => {
      const { testApp, key } = fx
      const a = await createPet('{"name":"A","categoryId":1}')
      const b = await createPet('{"name":"A","categoryId":1}')
      const [ra, rb] = await Promise.all(
        [a, b].map((pet) => testApp.request(key, { method: 'GET', url: `/v1/pets/${pet.id}` })),
      )
      assert.notEqual(ra?.headers.etag, rb?.headers.etag)
    })

    it('changes the ETag of a listing when its page changes, and answers 304 while it does not', async () => {
      const { testApp, key } = fx
      const url = '/v1/pets?status=sold&limit=100'
      const first = await testApp.request(key, { method: 'GET', url })
      const etag = String(first.headers.etag)
      assert.equal(first.headers['cache-control'], 'private, no-cache')
      const unchanged = await testApp.request(key, { method: 'GET', url, headers: { 'if-none-match': etag } })
      assert.equal(unchanged.statusCode, 304)
      assert.equal(unchanged.body, '')

      await createPet('{"name":"Sold","categoryId":2,"status":"sold"}')
      const changed = await testApp.request(key, { method: 'GET', url, headers: { 'if-none-match': etag } })
      assert.equal(changed.statusCode, 200)
      assert.notEqual(changed.headers.etag, etag)
      // A pet of another status leaves this listing, and its ETag, alone.
      await createPet('{"name":"Other","categoryId":2,"status":"pending"}')
      const still = await testApp.request(key, { method: 'GET', url, headers: { 'if-none-match': String(changed.headers.etag) } })
      assert.equal(still.statusCode, 304)
    })

    it('changes the ETag of a last page that gains a next link, though its body is the same', async () => {
      const { testApp, key } = fx
      const all = JSON.parse((await testApp.request(key, { method: 'GET', url: '/v1/pets?limit=100' })).body) as unknown[]
      const url = `/v1/pets?limit=${all.length}`
      const last = await testApp.request(key, { method: 'GET', url })
      assert.equal(last.headers.link, undefined)
      await createPet()
      const now = await testApp.request(key, { method: 'GET', url, headers: { 'if-none-match': String(last.headers.etag) } })
      assert.equal(now.statusCode, 200)
      assert.equal(now.body, last.body)
      assert.match(String(now.headers.link), /rel="next"/)
      assert.notEqual(now.headers.etag, last.headers.etag)
    })

    it('keeps errors uncacheable and without an ETag', async () => {
      const { testApp, key } = fx
      for (const url of ['/v1/pets/999999', '/v1/pets?limit=0']) {
        const response = await testApp.request(key, { method: 'GET', url, headers: { 'if-none-match': '*' } })
        assert.ok(response.statusCode === 404 || response.statusCode === 400, url)
        errorBody(response)
        assert.equal(response.headers.etag, undefined)
        assert.equal(response.headers['cache-control'], 'no-store')
      }
      const unauthenticated = await testApp.app.inject({ method: 'GET', url: '/v1/pets', headers: { 'if-none-match': '*' } })
      assert.equal(unauthenticated.statusCode, 401)
    })
  })
}
