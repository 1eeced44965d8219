import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type InjectOptions, type LightMyRequestResponse } from 'fastify'
import { ConfigError, loadConfig } from '../../src/config.js'
import { registerCors } from '../../src/http/cors.js'
import { DIRECT_ENGINES, buildTestApp, errorBody, postPet, useTestApp } from '../helper.js'

// CORS at the HTTP level: what a browser would be told, header by header, for listed and other origins,
// preflights and actual requests, successes and refusals. test/http/cors-browser.test.ts shows a real
// browser acting on it.

const APP = 'https://app.example.com'
const DEV = 'http://localhost:5173'
const CORS_ENV = { CORS_ORIGINS: `${APP}, ${DEV}` }

/** The exact wire values the issue asks for. */
const EXPOSED = 'ETag, Link, Location, RateLimit, RateLimit-Policy, Retry-After'
const ALLOWED_METHODS = 'GET, HEAD, POST'
const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key'

/** Origins a browser could send that are not listed, near misses included. */
const NOT_LISTED = [
  'https://evil.example',
  'http://app.example.com',
  'https://app.example.com:8443',
  'https://app.example.com.evil.example',
  'https://example.com',
  'null',
]

/** Every `Access-Control-*` header of a response. */
function corsHeaders(response: LightMyRequestResponse): Record<string, unknown> {
  return Object.fromEntries(Object.entries(response.headers).filter(([name]) => name.startsWith('access-control-')))
}

function varyOf(response: LightMyRequestResponse): string[] {
  return (response.headers.vary ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '')
}

/** The headers of an actual (not preflight) response that a listed origin's page may read. */
function assertReadableBy(response: LightMyRequestResponse, origin: string, what: string): void {
  assert.deepEqual(
    corsHeaders(response),
    { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSED },
    `${what}: ${response.statusCode}`,
  )
  assert.ok(varyOf(response).includes('origin'), `${what}: Vary is ${String(response.headers.vary)}`)
}

function assertNoCors(response: LightMyRequestResponse, what: string): void {
  assert.deepEqual(corsHeaders(response), {}, what)
}

const preflight = (url: string, origin: string, method: string, requestHeaders?: string): InjectOptions => ({
  method: 'OPTIONS',
  url,
  headers: {
    origin,
    'access-control-request-method': method,
    ...(requestHeaders === undefined ? {} : { 'access-control-request-headers': requestHeaders }),
  },
})

/** The answer to a preflight from a listed origin: 204, nothing but the CORS headers. */
function assertPreflightAnswered(response: LightMyRequestResponse, origin: string, what: string): void {
  assert.equal(response.statusCode, 204, `${what}: ${response.body}`)
  assert.equal(response.body, '')
  assert.deepEqual(
    corsHeaders(response),
    {
      'access-control-allow-origin': origin,
      'access-control-expose-headers': EXPOSED,
      'access-control-allow-methods': ALLOWED_METHODS,
      'access-control-allow-headers': ALLOWED_HEADERS,
      'access-control-max-age': '7200',
    },
    what,
  )
  assert.ok(varyOf(response).includes('origin'), what)
  for (const header of ['allow', 'www-authenticate', 'ratelimit', 'ratelimit-policy', 'access-control-allow-credentials']) {
    assert.equal(response.headers[header], undefined, `${what}: ${header}`)
  }
}

describe('CORS_ORIGINS', () => {
  it('is an empty list when unset or empty, and refuses white space around the value as every variable does', () => {
    assert.deepEqual(loadConfig({}, '/').corsOrigins, [])
    assert.deepEqual(loadConfig({ CORS_ORIGINS: '' }, '/').corsOrigins, [])
    assert.throws(() => loadConfig({ CORS_ORIGINS: '  ' }, '/'), /CORS_ORIGINS/)
  })

  it('reads a comma-separated list of exact origins, spaces around commas allowed, duplicates once', () => {
    const config = loadConfig({ CORS_ORIGINS: `${APP},${DEV} , http://127.0.0.1:8081,${APP}` }, '/')
    assert.deepEqual(config.corsOrigins, [APP, DEV, 'http://127.0.0.1:8081'])
    assert.ok(Object.isFrozen(config.corsOrigins))
  })

  const refused: [string, RegExp][] = [
    ['https://app.example.com/', /did you mean "https:\/\/app\.example\.com"/],
    ['https://app.example.com/app', /did you mean "https:\/\/app\.example\.com"/],
    ['https://app.example.com?x=1', /without path/],
    ['https://APP.example.com', /did you mean "https:\/\/app\.example\.com"/],
    ['https://app.example.com:443', /did you mean "https:\/\/app\.example\.com"/],
    ['http://localhost:80', /did you mean "http:\/\/localhost"/],
    ['*', /"\*" \(any origin or subdomain\) is not accepted/],
    ['https://*.example.com', /is not accepted/],
    ['app.example.com', /http\(s\) origins/],
    ['localhost:5173', /http\(s\) origins/],
    ['null', /http\(s\) origins/],
    ['ftp://files.example.com', /http\(s\) origins/],
    [`${APP},,${DEV}`, /empty entry/],
    [`${APP},`, /empty entry/],
    [`${APP} ${DEV}`, /http\(s\) origins|without path/],
  ]
  for (const [value, problem] of refused) {
    it(`stops the service on CORS_ORIGINS=${JSON.stringify(value)} with an error naming the variable`, () => {
      assert.throws(
        () => loadConfig({ CORS_ORIGINS: value }, '/'),
        (error: unknown) =>
          error instanceof ConfigError && error.variable === 'CORS_ORIGINS' && error.message.startsWith('CORS_ORIGINS ') && problem.test(error.message),
      )
    })
  }
})

for (const engine of DIRECT_ENGINES) {
  describe(`CORS for listed origins on ${engine}`, () => {
    const fx = useTestApp(engine, { env: CORS_ENV })
    const get = (url: string, origin: string | undefined, key = fx.key) =>
      fx.testApp.request(key, { method: 'GET', url, headers: origin === undefined ? {} : { origin } })

    it('lets a listed origin read listPets, getPet (200 and 304) and createPet, and says so for that origin only', async () => {
      const created = await fx.testApp.request(fx.key, {
        method: 'POST',
        url: '/v1/pets',
        headers: { origin: APP, 'content-type': 'application/json', 'idempotency-key': `cors-${engine}` },
        payload: '{"name":"Cors","categoryId":1}',
      })
      assert.equal(created.statusCode, 201, created.body)
      assertReadableBy(created, APP, 'createPet')
      assert.match(String(created.headers.location), /\/v1\/pets\/\d+$/)
      const { id } = JSON.parse(created.body) as { id: number }

      const list = await get('/v1/pets', APP)
      assert.equal(list.statusCode, 200)
      assertReadableBy(list, APP, 'listPets')
      assert.deepEqual(varyOf(list), ['origin', 'authorization'])
      assert.ok(list.headers.etag !== undefined && list.headers.ratelimit !== undefined && list.headers['ratelimit-policy'] !== undefined)

      const pet = await get(`/v1/pets/${id}`, DEV)
      assert.equal(pet.statusCode, 200)
      assertReadableBy(pet, DEV, 'getPet')
      const revalidated = await fx.testApp.request(fx.key, {
        method: 'GET',
        url: `/v1/pets/${id}`,
        headers: { origin: DEV, 'if-none-match': String(pet.headers.etag) },
      })
      assert.equal(revalidated.statusCode, 304)
      assertReadableBy(revalidated, DEV, 'getPet 304')

      const head = await fx.testApp.request(fx.key, { method: 'HEAD', url: '/v1/pets', headers: { origin: APP } })
      assert.equal(head.statusCode, 200)
      assertReadableBy(head, APP, 'HEAD listPets')
    })

    it('answers the preflights of the three operations with 204 and no key, before authentication', async () => {
      assertPreflightAnswered(
        await fx.testApp.app.inject(preflight('/v1/pets', APP, 'POST', 'authorization,content-type,idempotency-key')),
        APP,
        'createPet',
      )
      assertPreflightAnswered(await fx.testApp.app.inject(preflight('/v1/pets', DEV, 'GET', 'authorization')), DEV, 'listPets')
      assertPreflightAnswered(await fx.testApp.app.inject(preflight('/v1/pets/1', APP, 'GET', 'authorization')), APP, 'getPet')
      // With a wrong key, as a browser never sends one on a preflight: still not authenticated.
      const withKey = await fx.testApp.request('ps_live_wrong', preflight('/v1/pets', APP, 'GET', 'authorization'))
      assertPreflightAnswered(withKey, APP, 'preflight carrying Authorization')
      const logged = fx.testApp.logs.filter((line) => line.method === 'OPTIONS' && line.route === '/v1/pets')
      assert.ok(logged.length >= 2 && logged.every((line) => line.status === 204 && line.keyId === undefined))
    })

    it('allows exactly the methods of the operations the API serves, as its document lists them', async () => {
      const document = JSON.parse((await fx.testApp.app.inject({ method: 'GET', url: '/v1/openapi.json' })).body) as {
        paths: Record<string, Record<string, unknown>>
      }
      const served = new Set(Object.values(document.paths).flatMap((operations) => Object.keys(operations).map((method) => method.toUpperCase())))
      const allowed = (await fx.testApp.app.inject(preflight('/v1/pets', APP, 'POST'))).headers['access-control-allow-methods']
      assert.deepEqual(String(allowed).split(', ').sort(), [...served].sort())
    })

    it('gives refusals to a listed origin the same CORS headers, so that its page can read them', async () => {
      const missing = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets', headers: { origin: APP } })
      assert.equal(missing.statusCode, 401)
      assert.equal(errorBody(missing).code, 'unauthorized')
      assertReadableBy(missing, APP, '401')

      const notFound = await get('/v1/pets/999999', APP)
      assert.equal(errorBody(notFound).code, 'not_found')
      assertReadableBy(notFound, APP, '404 pet')
      assert.ok(notFound.headers.ratelimit !== undefined)

      const invalid = await fx.testApp.request(fx.key, {
        method: 'POST',
        url: '/v1/pets',
        headers: { origin: APP, 'content-type': 'application/json' },
        payload: '{"name":"Rex"}',
      })
      assert.equal(errorBody(invalid).code, 'invalid_request')
      assertReadableBy(invalid, APP, '400')

      const put = await fx.testApp.request(fx.key, { method: 'PUT', url: '/v1/pets', headers: { origin: APP } })
      assert.equal(errorBody(put).code, 'method_not_allowed')
      assertReadableBy(put, APP, '405')

      const noRoute = await get('/v2/pets', APP)
      assert.equal(errorBody(noRoute).code, 'not_found')
      assertReadableBy(noRoute, APP, '404 route')
    })

    it('answers an OPTIONS from a listed origin that is no preflight with 405 and Allow, as before', async () => {
      const response = await fx.testApp.app.inject({ method: 'OPTIONS', url: '/v1/pets', headers: { origin: APP } })
      assert.equal(response.statusCode, 405)
      assert.equal(errorBody(response).code, 'method_not_allowed')
      assert.equal(response.headers.allow, 'GET, HEAD, POST')
      assertReadableBy(response, APP, 'OPTIONS without Access-Control-Request-Method')
    })

    it('sends no Access-Control-* header at all to an origin that is not listed, nor without Origin', async () => {
      for (const origin of [...NOT_LISTED, undefined]) {
        const what = `Origin: ${String(origin)}`
        const response = await get('/v1/pets', origin)
        assert.equal(response.statusCode, 200, what)
        assertNoCors(response, what)
        // A cache must not reuse it for a listed origin.
        assert.deepEqual(varyOf(response), ['origin', 'authorization'], what)
        const refused = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets', headers: origin === undefined ? {} : { origin } })
        assert.equal(refused.statusCode, 401, what)
        assertNoCors(refused, `${what}, 401`)
      }
    })

    it('answers a preflight from an origin that is not listed as any OPTIONS was answered: 405 with Allow', async () => {
      const plain = await buildTestApp(engine)
      try {
        for (const [url, allow] of [
          ['/v1/pets', 'GET, HEAD, POST'],
          ['/v1/pets/1', 'GET, HEAD'],
        ] as const) {
          const asked = preflight(url, 'https://evil.example', 'POST', 'authorization,content-type')
          const refused = await fx.testApp.app.inject(asked)
          const before = await plain.app.inject(asked)
          assert.equal(refused.statusCode, 405, url)
          assertNoCors(refused, url)
          assert.equal(refused.headers.allow, allow)
          assert.deepEqual(errorBody(refused), errorBody(before))
          assert.equal(before.headers.allow, allow)
        }
      } finally {
        await plain.close()
      }
    })

    it('still answers unknown paths 404 and known paths 405 for other methods, OPTIONS included', async () => {
      for (const method of ['GET', 'POST', 'OPTIONS'] as const) {
        const response = await fx.testApp.app.inject({ method, url: '/nope', headers: { origin: APP } })
        assert.equal(response.statusCode, 404, `${method} /nope`)
        assert.equal(errorBody(response).code, 'not_found')
        const other = await fx.testApp.app.inject({ method, url: '/nope' })
        assert.equal(other.statusCode, 404, `${method} /nope without Origin`)
      }
      const del = await fx.testApp.app.inject({ method: 'DELETE', url: '/v1/pets/1', headers: { origin: 'https://evil.example' } })
      assert.equal(del.statusCode, 405)
      assert.equal(del.headers.allow, 'GET, HEAD')
    })

    it('lets a listed origin read the OpenAPI document, the docs page and the health checks too', async () => {
      for (const url of ['/v1/openapi.json', '/docs', '/healthz', '/readyz']) {
        const response = await fx.testApp.app.inject({ method: 'GET', url, headers: { origin: DEV } })
        assert.equal(response.statusCode, 200, url)
        assertReadableBy(response, DEV, url)
        assertNoCors(await fx.testApp.app.inject({ method: 'GET', url, headers: { origin: 'https://evil.example' } }), url)
      }
    })
  })

  describe(`CORS on refusals by the limits and the database on ${engine}`, () => {
    describe('per-key limit', () => {
      const fx = useTestApp(engine, { env: { ...CORS_ENV, RATE_LIMIT_PER_KEY: '1' } })

      it('lets a listed origin read a 429 with Retry-After and the RateLimit headers, and still answers its preflights', async () => {
        const headers = { origin: APP }
        assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers })).statusCode, 200)
        const limited = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers })
        assert.equal(limited.statusCode, 429)
        assert.equal(errorBody(limited).code, 'rate_limited')
        assertReadableBy(limited, APP, '429 per key')
        for (const name of ['retry-after', 'ratelimit', 'ratelimit-policy']) assert.ok(limited.headers[name] !== undefined, name)
        assertPreflightAnswered(await fx.testApp.app.inject(preflight('/v1/pets', APP, 'GET', 'authorization')), APP, 'over the limit')
      })
    })

    describe('failed authentication limit', () => {
      const fx = useTestApp(engine, { env: { ...CORS_ENV, RATE_LIMIT_FAILED_AUTH_PER_IP: '1' } })

      it('lets a listed origin read the 429, and answers preflights from the refused address', async () => {
        const wrong = `ps_live_${'x'.repeat(32)}`
        const remoteAddress = '198.51.100.9'
        const send = () => fx.testApp.request(wrong, { method: 'GET', url: '/v1/pets', headers: { origin: APP }, remoteAddress })
        assert.equal((await send()).statusCode, 401)
        const limited = await send()
        assert.equal(limited.statusCode, 429)
        assertReadableBy(limited, APP, '429 failed auth')
        assert.ok(limited.headers['retry-after'] !== undefined)
        assertPreflightAnswered(
          await fx.testApp.app.inject({ ...preflight('/v1/pets', APP, 'GET', 'authorization'), remoteAddress }),
          APP,
          'from the refused address',
        )
      })
    })

    it('lets a listed origin read a 503 unavailable with Retry-After', async (t) => {
      const testApp = await buildTestApp(engine, { env: CORS_ENV })
      t.after(() => testApp.close())
      const key = await testApp.createKey()
      await testApp.storage.close()
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets', headers: { origin: APP } })
      assert.equal(response.statusCode, 503)
      assert.equal(errorBody(response).code, 'unavailable')
      assert.equal(response.headers['retry-after'], '5')
      assertReadableBy(response, APP, '503 unavailable')
    })
  })

  describe(`without CORS_ORIGINS on ${engine}`, () => {
    const fx = useTestApp(engine)

    it('sends no CORS header to anyone and no Vary: Origin, as before', async () => {
      for (const origin of [APP, DEV, 'https://evil.example']) {
        const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers: { origin } })
        assert.equal(response.statusCode, 200)
        assertNoCors(response, origin)
        assert.equal(response.headers.vary, 'Authorization')
      }
    })

    it('answers every preflight 405 with Allow', async () => {
      const response = await fx.testApp.app.inject(preflight('/v1/pets', APP, 'GET', 'authorization'))
      assert.equal(response.statusCode, 405)
      assert.equal(errorBody(response).code, 'method_not_allowed')
      assert.equal(response.headers.allow, 'GET, HEAD, POST')
      assertNoCors(response, 'preflight')
    })
  })
}

describe('CORS and load shedding', () => {
  const fx = useTestApp('sqlite', { env: { ...CORS_ENV, OVERLOAD_MAX_HEAP_MB: '1' } })

  it('lets a listed origin read a 503 overloaded, and answers preflights while shedding', async () => {
    // Nothing is shed until the samples cover only time after the app was ready (load-shedding.ts): served till then.
    const list = () => fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers: { origin: APP } })
    let shed = await list()
    for (const deadline = performance.now() + 5_000; shed.statusCode === 200 && performance.now() < deadline; shed = await list()) await sleep(25)
    assert.equal(shed.statusCode, 503)
    assert.equal(errorBody(shed).code, 'overloaded')
    assert.ok(shed.headers['retry-after'] !== undefined)
    assertReadableBy(shed, APP, '503 overloaded')
    assertPreflightAnswered(await fx.testApp.app.inject(preflight('/v1/pets', APP, 'POST', 'content-type')), APP, 'while shedding')
  })
})

describe('the exposed headers', () => {
  const fx = useTestApp('sqlite', { env: { ...CORS_ENV, RATE_LIMIT_PER_KEY: '3' } })

  it('are each sent by the service, under that name', async () => {
    const sent = new Set<string>()
    const note = (response: LightMyRequestResponse) => {
      for (const name of Object.keys(response.headers)) sent.add(name)
    }
    note(await postPet(fx.testApp, fx.key, '{"name":"One","categoryId":1}'))
    await postPet(fx.testApp, fx.key, '{"name":"Two","categoryId":1}')
    const page = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=1', headers: { origin: APP } })
    assert.ok(page.headers.link !== undefined)
    note(page)
    const limited = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers: { origin: APP } })
    assert.equal(limited.statusCode, 429)
    note(limited)
    for (const name of EXPOSED.split(', ')) assert.ok(sent.has(name.toLowerCase()), `${name} is never sent`)
  })
})

describe('the allowed methods', () => {
  it('are those of the routes added after CORS, in the order of Allow, without the 405 routes', async (t) => {
    const app = Fastify()
    t.after(() => app.close())
    await registerCors(app, [APP])
    const answer = async () => ''
    app.put('/things/:id', answer)
    // With the HEAD route Fastify adds.
    app.get('/things', answer)
    app.route({ method: 'DELETE', url: '/things', config: { methodNotAllowed: true }, handler: answer })
    const response = await app.inject(preflight('/things', APP, 'PUT'))
    assert.equal(response.headers['access-control-allow-methods'], 'GET, HEAD, PUT')
  })
})
