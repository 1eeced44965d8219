import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { KEY_RECHECK_MS, createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { CONTRACT_ENGINES, buildTestApp, errorBody, useTestApp } from '../helper.js'

const CHALLENGE = 'Bearer realm="petstore"'
const INVALID_CHALLENGE = 'Bearer realm="petstore", error="invalid_token"'

for (const engine of CONTRACT_ENGINES) {
  describe(`authentication on ${engine}`, () => {
    const fx = useTestApp(engine)

    const list = (authorization?: string) =>
      fx.testApp.app.inject({
        method: 'GET',
        url: '/v1/pets',
        headers: authorization === undefined ? {} : { authorization },
      })

    it('accepts a valid key for each of the three operations', async () => {
      const created = await fx.testApp.request(fx.key, {
        method: 'POST',
        url: '/v1/pets',
        headers: { 'content-type': 'application/json' },
        payload: '{"name":"Auth","categoryId":1}',
      })
      assert.equal(created.statusCode, 201)
      const { id } = JSON.parse(created.body) as { id: number }
      assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
      assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${id}` })).statusCode, 200)
    })

    for (const [method, url] of [
      ['GET', '/v1/pets'],
      ['POST', '/v1/pets'],
      ['GET', '/v1/pets/1'],
    ] as const) {
      it(`refuses ${method} ${url} without a key with 401 and a bare Bearer challenge`, async () => {
        const response = await fx.testApp.app.inject({ method, url })
        assert.equal(response.statusCode, 401)
        assert.equal(errorBody(response).code, 'unauthorized')
        assert.equal(response.headers['www-authenticate'], CHALLENGE)
      })
    }

    it('treats another scheme like a missing key', async () => {
      const response = await list(`Basic ${Buffer.from('user:pass').toString('base64')}`)
      assert.equal(response.statusCode, 401)
      assert.equal(response.headers['www-authenticate'], CHALLENGE)
    })

    it('accepts the scheme word in any case', async () => {
      assert.equal((await list(`bearer ${fx.key}`)).statusCode, 200)
      assert.equal((await list(`BEARER ${fx.key}`)).statusCode, 200)
      assert.equal((await list(`BeArEr ${fx.key}`)).statusCode, 200)
    })

    for (const [label, authorization] of [
      ['a Bearer scheme with no token', 'Bearer'],
      ['a Bearer scheme with an empty token', 'Bearer '],
      ['a Bearer scheme followed by spaces and a tab', 'Bearer  \t '],
    ] as const) {
      it(`answers ${label} as a missing key: one is required, with no invalid_token`, async () => {
        const response = await list(authorization)
        assert.equal(response.statusCode, 401)
        assert.equal(errorBody(response).message, 'An API key is required: send it as "Authorization: Bearer <key>".')
        assert.equal(response.headers['www-authenticate'], CHALLENGE)
      })
    }

    for (const [label, authorization] of [
      ['a token with a space in it', () => 'Bearer two words'],
      ['a valid key with a character added', () => `Bearer ${fx.key}x`],
      ['a valid key with its last character removed', () => `Bearer ${fx.key.slice(0, -1)}`],
    ] as const) {
      it(`refuses ${label} with invalid_token`, async () => {
        const response = await list(authorization())
        assert.equal(response.statusCode, 401)
        assert.equal(errorBody(response).code, 'unauthorized')
        assert.equal(response.headers['www-authenticate'], INVALID_CHALLENGE)
      })
    }

    it('answers unknown, revoked, expired and other-environment keys identically', async () => {
      const service = createApiKeysService({ apiKeys: fx.testApp.storage.apiKeys, clock: fx.testApp.clock, environment: 'production' })
      const revoked = await service.create({ name: 'to revoke' })
      assert.equal((await list(`Bearer ${revoked.secret}`)).statusCode, 200)
      await service.revoke(revoked.key.id)
      // (The 60 s the clock moves below is far past KEY_RECHECK_MS: the revocation is seen.)

      const expiring = await fx.testApp.createKey({ name: 'expiring', expiresInMs: 60_000 })
      assert.equal((await list(`Bearer ${expiring}`)).statusCode, 200)
      const staging = await fx.testApp.createKey({ name: 'staging', environment: 'staging' })
      const unknown = `ps_live_${'A'.repeat(32)}`
      const stagingLookalike = `ps_live_${staging.slice('ps_test_'.length)}`

      fx.testApp.clock.advance(60_000)
      const answers = []
      for (const candidate of [unknown, revoked.secret, expiring, staging, stagingLookalike]) {
        const response = await list(`Bearer ${candidate}`)
        answers.push({
          status: response.statusCode,
          body: response.body,
          challenge: response.headers['www-authenticate'],
        })
      }
      fx.testApp.clock.advance(-60_000)
      for (const answer of answers) assert.deepEqual(answer, answers[0])
      assert.equal(answers[0]?.status, 401)
      assert.equal(answers[0]?.challenge, INVALID_CHALLENGE)
    })

    it('refuses a revoked key once its cached check is KEY_RECHECK_MS old, well within 2 seconds', async () => {
      const service = createApiKeysService({ apiKeys: fx.testApp.storage.apiKeys, clock: fx.testApp.clock, environment: 'production' })
      const { key: record, secret } = await service.create({ name: 'revoked live' })
      assert.equal((await list(`Bearer ${secret}`)).statusCode, 200)
      await service.revoke(record.id)
      fx.testApp.clock.advance(KEY_RECHECK_MS - 1)
      // Still remembered from the last check: this is the window the 2-second rule allows.
      assert.equal((await list(`Bearer ${secret}`)).statusCode, 200)
      fx.testApp.clock.advance(1)
      assert.equal((await list(`Bearer ${secret}`)).statusCode, 401)
      fx.testApp.clock.advance(-KEY_RECHECK_MS)
    })

    it('remembers keys that authenticated, so a request costs no key lookup, and re-reads them each KEY_RECHECK_MS', async () => {
      let lookups = 0
      const counted = Object.create(fx.testApp.storage.apiKeys) as typeof fx.testApp.storage.apiKeys
      counted.findBySecretHash = (hash) => {
        lookups++
        return fx.testApp.storage.apiKeys.findBySecretHash(hash)
      }
      const service = createApiKeysService({ apiKeys: counted, clock: fx.testApp.clock, environment: 'production' })
      const { secret } = await service.create({ name: 'remembered' })
      for (let i = 0; i < 5; i++) assert.ok(await service.authenticate(secret))
      assert.equal(lookups, 1)
      fx.testApp.clock.advance(KEY_RECHECK_MS)
      assert.ok(await service.authenticate(secret))
      assert.equal(lookups, 2)
      // Unknown secrets are looked up every time and never remembered.
      for (let i = 0; i < 3; i++) assert.equal(await service.authenticate(`ps_live_${'B'.repeat(32)}`), undefined)
      assert.equal(lookups, 5)
      fx.testApp.clock.advance(-KEY_RECHECK_MS)
    })

    it('expires a key at its expiry instant, not before', async () => {
      const expiring = await fx.testApp.createKey({ name: 'short', expiresInMs: 1_000 })
      fx.testApp.clock.advance(999)
      assert.equal((await list(`Bearer ${expiring}`)).statusCode, 200)
      fx.testApp.clock.advance(1)
      assert.equal((await list(`Bearer ${expiring}`)).statusCode, 401)
      fx.testApp.clock.advance(-1_000)
    })

    it('writes last used at most once a minute per key', async () => {
      const fresh = await fx.testApp.createKey({ name: 'last used' })
      const lastUsed = async () =>
        (await fx.testApp.storage.apiKeys.list()).find((k) => k.name === 'last used')?.lastUsedAt ?? null
      assert.equal(await lastUsed(), null)
      const start = fx.testApp.clock.now()
      await list(`Bearer ${fresh}`)
      assert.equal(await lastUsed(), start)
      fx.testApp.clock.advance(30_000)
      await list(`Bearer ${fresh}`)
      assert.equal(await lastUsed(), start, 'a second use within the minute is not written')
      fx.testApp.clock.advance(30_000)
      await list(`Bearer ${fresh}`)
      assert.equal(await lastUsed(), start + 60_000)
      fx.testApp.clock.advance(-60_000)
    })

    it('stores only a hash of the key, never the key itself', async () => {
      const secret = await fx.testApp.createKey({ name: 'hashed' })
      const record = (await fx.testApp.storage.apiKeys.list()).find((k) => k.name === 'hashed')
      assert.ok(record)
      assert.equal(record.prefix, secret.slice(0, 12))
      assert.doesNotMatch(JSON.stringify(record), new RegExp(secret.slice(12)))
    })

    it('makes keys of 32 base62 characters after the environment prefix', async () => {
      const secrets = await Promise.all([1, 2, 3].map(() => fx.testApp.createKey()))
      for (const secret of secrets) assert.match(secret, /^ps_live_[0-9A-Za-z]{32}$/)
      assert.equal(new Set(secrets).size, 3)
      const staging = await fx.testApp.createKey({ environment: 'staging' })
      assert.match(staging, /^ps_test_[0-9A-Za-z]{32}$/)
    })

    it('serves the health checks and the OpenAPI document without a key', async () => {
      for (const url of ['/healthz', '/readyz', '/v1/openapi.json']) {
        assert.equal((await fx.testApp.app.inject({ method: 'GET', url })).statusCode, 200, url)
      }
    })
  })
}

for (const engine of CONTRACT_ENGINES) {
  describe(`keep-alive connections on ${engine}`, () => {
    it('authenticates every request of a keep-alive connection by the header it sends, whatever the one before sent', async (t) => {
      // A connection remembers its last header's key and hash (api-keys.auth.ts): each kind follows each
      // kind, on one connection, and each answer is the one its own header earns. An app of its own, whose
      // failed-authentication limit these 56 failures do not reach.
      const testApp = await buildTestApp(engine, { env: { RATE_LIMIT_FAILED_AUTH_PER_IP: '1000' } })
      t.after(() => testApp.close())
      const service = createApiKeysService({ apiKeys: testApp.storage.apiKeys, clock: testApp.clock, environment: 'production' })
      const revoked = await service.create({ name: 'revoked' })
      await service.revoke(revoked.key.id)
      const kinds = {
        reader: { authorization: `Bearer ${await testApp.createKey()}`, status: 200, challenge: undefined },
        'another reader': { authorization: `Bearer ${await testApp.createKey({ name: 'reader 2' })}`, status: 200, challenge: undefined },
        'a writer only': { authorization: `Bearer ${await testApp.createKey({ name: 'writer', scopes: ['pets:write'] })}`, status: 403, challenge: 'Bearer realm="petstore", error="insufficient_scope", scope="pets:read"' },
        revoked: { authorization: `Bearer ${revoked.secret}`, status: 401, challenge: INVALID_CHALLENGE },
        unknown: { authorization: `Bearer ps_live_${'B'.repeat(32)}`, status: 401, challenge: INVALID_CHALLENGE },
        'another scheme': { authorization: 'Basic dXNlcjpwYXNz', status: 401, challenge: CHALLENGE },
        none: { authorization: undefined, status: 401, challenge: CHALLENGE },
      } as const
      const names = Object.keys(kinds) as (keyof typeof kinds)[]
      await testApp.app.listen({ host: '127.0.0.1', port: 0 })
      const { port } = testApp.app.server.address() as AddressInfo
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      try {
        const sockets = new Set<unknown>()
        for (const first of names) {
          for (const second of names) {
            for (const name of [first, second]) {
              const { authorization, status, challenge } = kinds[name]
              const answer = await new Promise<{ status: number | undefined; challenge: string | undefined }>((resolve, reject) => {
                const request = http.get({ agent, host: '127.0.0.1', port, path: '/v1/pets?limit=1', headers: authorization === undefined ? {} : { authorization } }, (response) => {
                  sockets.add(response.socket)
                  response.resume().on('end', () => resolve({ status: response.statusCode, challenge: response.headers['www-authenticate'] }))
                })
                request.on('error', reject)
              })
              assert.deepEqual(answer, { status, challenge }, `${name}, of ${first} then ${second}`)
            }
          }
        }
        assert.equal(sockets.size, 1, 'every request went over one connection')
      } finally {
        agent.destroy()
      }
    })
  })
}

describe('authentication in staging', () => {
  it('accepts ps_test_ keys and refuses ps_live_ keys', async (t) => {
    const testApp = await buildTestApp('sqlite', { env: { PETSTORE_ENV: 'staging' } })
    t.after(() => testApp.close())
    const staging = await testApp.createKey()
    const production = await testApp.createKey({ environment: 'production' })
    assert.match(staging, /^ps_test_/)
    assert.equal((await testApp.request(staging, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
    assert.equal((await testApp.request(production, { method: 'GET', url: '/v1/pets' })).statusCode, 401)
  })
})
