import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { LIMITED_LOOKUP_MS } from '../../src/api-keys/api-keys.rate-limit.js'
import { KEY_RECHECK_MS, createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { buildTestApp, errorBody, type TestApp, useTestApp } from '../helper.js'
import { freePort } from '../processes.js'
import { REDIS_MISSING, type RedisServer, startRedis } from '../redis.js'

const list = (testApp: TestApp, key: string, remoteAddress = '203.0.113.7') =>
  testApp.request(key, { method: 'GET', url: '/v1/pets', remoteAddress })

describe('rate limit per API key', () => {
  const fx = useTestApp('sqlite', { env: { RATE_LIMIT_PER_KEY: '5' } })

  it('counts down in RateLimit headers, then answers 429 rate_limited with Retry-After', async () => {
    for (let i = 1; i <= 5; i++) {
      const response = await list(fx.testApp, fx.key)
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['ratelimit-policy'], '"per-key";q=5;w=60')
      assert.match(String(response.headers.ratelimit), new RegExp(`^"per-key";r=${5 - i};t=([1-9]|[1-5][0-9]|60)$`))
    }
    const refused = await list(fx.testApp, fx.key)
    assert.equal(refused.statusCode, 429)
    assert.equal(errorBody(refused).code, 'rate_limited')
    assert.ok(Number(refused.headers['retry-after']) >= 1 && Number(refused.headers['retry-after']) <= 60)
    assert.match(String(refused.headers.ratelimit), /^"per-key";r=0;t=\d+$/)
    assert.equal(refused.headers['cache-control'], 'no-store')
  })

  it('keeps a separate budget for every key', async () => {
    const other = await fx.testApp.createKey({ name: 'other' })
    assert.equal((await list(fx.testApp, other)).statusCode, 200)
  })
})

describe('rate limit turned off', () => {
  const fx = useTestApp('sqlite', { env: { RATE_LIMIT_PER_KEY: '0' } })

  it('sends no RateLimit headers and never 429 with RATE_LIMIT_PER_KEY=0', async () => {
    for (let i = 0; i < 30; i++) {
      const response = await list(fx.testApp, fx.key)
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['ratelimit-policy'], undefined)
    }
  })
})

describe('failed authentication limit per client address', () => {
  const fx = useTestApp('sqlite', { env: { RATE_LIMIT_FAILED_AUTH_PER_IP: '3' } })
  const wrong = `ps_live_${'x'.repeat(32)}`

  it('answers 401 up to the limit, then 429, before any lookup, for a key this process has not seen authenticate, valid or not', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await list(fx.testApp, wrong, '198.51.100.1')).statusCode, 401)
    const limited = await list(fx.testApp, wrong, '198.51.100.1')
    assert.equal(limited.statusCode, 429)
    assert.equal(errorBody(limited).code, 'rate_limited')
    assert.equal(limited.headers['ratelimit-policy'], '"failed-auth";q=3;w=60')
    assert.ok(Number(limited.headers['retry-after']) >= 1)
    // The address's one lookup of the second goes to the next bad key; until the next second, a key
    // never looked up here is refused unread, so a guess that happens to be right is not told apart.
    assert.equal((await list(fx.testApp, wrong, '198.51.100.1')).statusCode, 429)
    const unseen = await fx.testApp.createKey({ name: 'unseen' })
    assert.equal((await list(fx.testApp, unseen, '198.51.100.1')).statusCode, 429)
    assert.equal((await list(fx.testApp, wrong, '198.51.100.1')).statusCode, 429)
    // A second later the address has a lookup again: a new key (after retries with a revoked one, say) gets in.
    fx.testApp.clock.advance(LIMITED_LOOKUP_MS)
    assert.equal((await list(fx.testApp, unseen, '198.51.100.1')).statusCode, 200)
    assert.equal((await list(fx.testApp, wrong, '198.51.100.1')).statusCode, 429)
  })

  it('serves, from an address over the limit, a key that authenticated in this process, with its own limit’s headers', async () => {
    const neighbour = await fx.testApp.createKey({ name: 'neighbour behind the same NAT' })
    assert.equal((await list(fx.testApp, neighbour, '198.51.100.6')).statusCode, 200)
    for (let i = 0; i < 4; i++) await list(fx.testApp, wrong, '198.51.100.6')
    assert.equal((await list(fx.testApp, wrong, '198.51.100.6')).statusCode, 429)
    const served = await list(fx.testApp, neighbour, '198.51.100.6')
    assert.equal(served.statusCode, 200, served.body)
    assert.match(String(served.headers['ratelimit-policy']), /^"per-key"/)
    // A known key that is no longer valid is refused as over the limit, not looked at more than the others.
    const revoked = await fx.testApp.createKey({ name: 'revoked' })
    assert.equal((await list(fx.testApp, revoked, '198.51.100.7')).statusCode, 200)
    const service = createApiKeysService({ apiKeys: fx.testApp.storage.apiKeys, clock: fx.testApp.clock, environment: 'production' })
    const record = (await service.list()).find((key) => key.name === 'revoked')
    assert.ok(record !== undefined)
    await service.revoke(record.id)
    fx.testApp.clock.advance(KEY_RECHECK_MS)
    assert.equal((await list(fx.testApp, revoked, '198.51.100.6')).statusCode, 429)
    assert.equal((await list(fx.testApp, neighbour, '198.51.100.6')).statusCode, 200)
  })

  it('leaves other addresses alone', async () => {
    assert.equal((await list(fx.testApp, fx.key, '198.51.100.2')).statusCode, 200)
    assert.equal((await list(fx.testApp, wrong, '198.51.100.2')).statusCode, 401)
  })

  it('does not count requests that send no key at all', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets', remoteAddress: '198.51.100.3' })
      assert.equal(response.statusCode, 401)
    }
    assert.equal((await list(fx.testApp, fx.key, '198.51.100.3')).statusCode, 200)
  })

  // The guard skips its store read for addresses that never failed in this process; the memory of
  // those that did is bounded at 10,000, and past it every address is checked again.
  it('still refuses an address over the limit when 10,000 other addresses failed in the same window', async () => {
    for (let i = 0; i < 10_000; i++) {
      const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`
      assert.equal((await list(fx.testApp, wrong, address)).statusCode, 401)
    }
    for (let i = 0; i < 3; i++) assert.equal((await list(fx.testApp, wrong, '198.51.100.4')).statusCode, 401)
    assert.equal((await list(fx.testApp, wrong, '198.51.100.4')).statusCode, 429)
    assert.equal((await list(fx.testApp, wrong, '198.51.100.4')).statusCode, 429)
    assert.equal((await list(fx.testApp, await fx.testApp.createKey({ name: 'new' }), '198.51.100.4')).statusCode, 429)
    assert.equal((await list(fx.testApp, fx.key, '198.51.100.5')).statusCode, 200)
  })
})

describe('rate limits on Redis', { skip: REDIS_MISSING }, () => {
  let redis: RedisServer
  let first: TestApp
  let second: TestApp
  let key: string
  before(async () => {
    redis = await startRedis()
    first = await buildTestApp('sqlite', { env: { REDIS_URL: redis.url, RATE_LIMIT_PER_KEY: '4' } })
    key = await first.createKey()
    const database = first.config.database.engine === 'sqlite' ? first.config.database.path : ''
    second = await buildTestApp('sqlite', {
      env: { REDIS_URL: redis.url, RATE_LIMIT_PER_KEY: '4', DATABASE_URL: `sqlite://${database}` },
    })
  })
  after(async () => {
    await first.close()
    await second.close()
    await redis.stop()
  })

  it('shares one budget between instances', async () => {
    assert.equal((await list(first, key)).statusCode, 200)
    assert.equal((await list(second, key)).statusCode, 200)
    assert.equal((await list(first, key)).statusCode, 200)
    const last = await list(second, key)
    assert.equal(last.statusCode, 200)
    assert.match(String(last.headers.ratelimit), /^"per-key";r=0;/)
    assert.equal((await list(first, key)).statusCode, 429)
    assert.equal((await list(second, key)).statusCode, 429)
  })

  it('reports the Redis store as ready', async () => {
    const ready = await first.app.inject({ method: 'GET', url: '/readyz' })
    assert.deepEqual(JSON.parse(ready.body), { status: 'ok', checks: { database: 'ok', rateLimitStore: 'redis' } })
  })
})

describe('rate limits when Redis is down', () => {
  it('keeps serving without limits (fails open) and says so in /readyz', async (t) => {
    const port = await freePort()
    const testApp = await buildTestApp('sqlite', { env: { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_PER_KEY: '2' } })
    t.after(() => testApp.close())
    const key = await testApp.createKey()
    for (let i = 0; i < 5; i++) assert.equal((await list(testApp, key)).statusCode, 200)
    const ready = await testApp.app.inject({ method: 'GET', url: '/readyz' })
    assert.equal(ready.statusCode, 200)
    assert.deepEqual(JSON.parse(ready.body), {
      status: 'degraded',
      checks: { database: 'ok', rateLimitStore: 'unavailable' },
    })
  })
})

describe('readiness with in-memory limits', () => {
  const fx = useTestApp('sqlite')
  it('reports the memory store', async () => {
    const ready = await fx.testApp.app.inject({ method: 'GET', url: '/readyz' })
    assert.deepEqual(JSON.parse(ready.body), { status: 'ok', checks: { database: 'ok', rateLimitStore: 'memory' } })
  })
})
