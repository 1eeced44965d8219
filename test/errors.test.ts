import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import { ERROR_CODES, ERROR_STATUS } from '../src/errors.js'
import { CONTRACT_ENGINES, type Engine, buildTestApp, errorBody, postPet, type TestApp, useTestApp } from './helper.js'

/** Sends raw bytes to a listening server and returns what it answered, up to the close. */
function rawRequest(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(bytes))
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (answer += chunk))
    socket.on('close', () => resolve(answer))
    socket.on('error', reject)
    socket.setTimeout(5_000, () => socket.destroy(new Error('timeout')))
  })
}

function parseRawResponse(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const [head = '', body = ''] = raw.split('\r\n\r\n')
  const [statusLine = '', ...headerLines] = head.split('\r\n')
  const headers = Object.fromEntries(
    headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  )
  return { status: Number(statusLine.split(' ')[1]), headers, body }
}

/** What each engine's driver throws when its database cannot serve. */
function outageError(engine: Engine): Error {
  return engine === 'sqlite'
    ? new Sqlite.SqliteError('database or disk is full', 'SQLITE_FULL')
    : Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
}

for (const engine of CONTRACT_ENGINES) {
  describe(`error responses on ${engine}`, () => {
    const fx = useTestApp(engine)

    it('answers an unknown route with 404 not_found in the error shape', async () => {
      for (const url of ['/', '/v2/pets', '/v1/pet', '/v1/pets/1/owner', '/v1', '/pets']) {
        const response = await fx.testApp.request(fx.key, { method: 'GET', url })
        assert.equal(response.statusCode, 404, url)
        assert.equal(errorBody(response).code, 'not_found')
        assert.equal(response.headers['cache-control'], 'no-store')
      }
    })

    it('answers another method on a known path with 405 and Allow', async () => {
      const cases = [
        ['DELETE', '/v1/pets/1', 'GET, HEAD'],
        ['PUT', '/v1/pets/1', 'GET, HEAD'],
        ['PATCH', '/v1/pets', 'GET, HEAD, POST'],
        ['DELETE', '/v1/pets', 'GET, HEAD, POST'],
        ['POST', '/v1/pets/1', 'GET, HEAD'],
      ] as const
      for (const [method, url, allow] of cases) {
        const response = await fx.testApp.request(fx.key, { method, url })
        assert.equal(response.statusCode, 405, `${method} ${url}`)
        assert.equal(errorBody(response).code, 'method_not_allowed')
        assert.equal(response.headers.allow, allow)
      }
    })

    it('answers HEAD like GET, without a body', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'HEAD', url: '/v1/pets' })
      assert.equal(response.statusCode, 200)
      assert.equal(response.body, '')
    })

    it('answers a malformed URL encoding with 400 invalid_request', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/%E0%A4%A', headers: { 'x-request-id': 'bad-url-1' } })
      assert.equal(response.statusCode, 400)
      assert.equal(errorBody(response).code, 'invalid_request')
      assert.equal(response.headers['x-request-id'], 'bad-url-1')
    })

    it('reads a trailing slash after /v1/pets as an empty petId: 400 naming petId', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/' })
      assert.equal(response.statusCode, 400)
      assert.match(errorBody(response).message, /'petId'/)
    })

    it('sets no-store on every error', async () => {
      const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets' })
      assert.equal(response.headers['cache-control'], 'no-store')
    })

    it('keeps every error code in the catalogue with the status it is sent with', () => {
      for (const code of ERROR_CODES) assert.ok(ERROR_STATUS[code] >= 400 && ERROR_STATUS[code] <= 599, code)
      assert.equal(new Set(ERROR_CODES).size, ERROR_CODES.length)
    })
  })

  describe(`malformed HTTP on ${engine}`, () => {
    let testApp: TestApp
    let port: number
    before(async () => {
      testApp = await buildTestApp(engine)
      await testApp.app.listen({ port: 0, host: '127.0.0.1' })
      port = (testApp.app.server.address() as net.AddressInfo).port
    })
    after(() => testApp.close())

    it('answers bytes that are not HTTP with 400 in the error shape', async () => {
      const response = parseRawResponse(await rawRequest(port, 'THIS IS NOT HTTP\r\n\r\n'))
      assert.equal(response.status, 400)
      assert.match(response.headers['content-type'] ?? '', /^application\/json/)
      assert.deepEqual(Object.keys(JSON.parse(response.body) as object).sort(), ['code', 'message', 'status'])
      assert.deepEqual((JSON.parse(response.body) as { code: string }).code, 'invalid_request')
    })

    it('answers oversized headers with 431 in the error shape', async () => {
      const big = 'x'.repeat(20_000)
      const response = parseRawResponse(
        await rawRequest(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nX-Big: ${big}\r\n\r\n`),
      )
      assert.equal(response.status, 431)
      assert.deepEqual(JSON.parse(response.body), {
        code: 'request_header_fields_too_large',
        message: 'The request headers are too large.',
        status: 431,
      })
    })
  })

  describe(`faults on ${engine}`, () => {
    it('answers a bug with 500 internal_error, hides the cause and logs it', async (t) => {
      const testApp = await buildTestApp(engine, {
        storage: (storage) => ({
          ...storage,
          pets: {
            ...storage.pets,
            list: () => Promise.reject(new Error('boom: secret detail at /var/lib/petstore')),
          },
          isUnavailable: (error) => storage.isUnavailable(error),
        }),
      })
      t.after(() => testApp.close())
      const key = await testApp.createKey()
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets' })
      assert.equal(response.statusCode, 500)
      const body = errorBody(response)
      assert.equal(body.code, 'internal_error')
      assert.doesNotMatch(body.message, /boom|secret|var\/lib/)
      assert.match(body.message, new RegExp(String(response.headers['x-request-id'])))
      const logged = testApp.logs.find((line) => line.level === 50)
      assert.match(JSON.stringify(logged), /boom: secret detail/)
    })

    it('answers a database failure with 503 unavailable and Retry-After', async (t) => {
      const testApp = await buildTestApp(engine, {
        storage: (storage) => ({
          ...storage,
          pets: {
            ...storage.pets,
            create: () => Promise.reject(outageError(engine)),
          },
          isUnavailable: (error) => storage.isUnavailable(error),
        }),
      })
      t.after(() => testApp.close())
      const key = await testApp.createKey()
      const response = await postPet(testApp, key, '{"name":"Full","categoryId":1}')
      assert.equal(response.statusCode, 503)
      assert.equal(errorBody(response).code, 'unavailable')
      assert.equal(response.headers['retry-after'], '5')
    })

    it('answers 503 and fails readiness when the database is gone, while liveness holds', async (t) => {
      const testApp = await buildTestApp(engine)
      t.after(() => testApp.close())
      const key = await testApp.createKey()
      await testApp.storage.close()
      const response = await testApp.request(key, { method: 'GET', url: '/v1/pets' })
      assert.equal(response.statusCode, 503)
      assert.equal(errorBody(response).code, 'unavailable')
      const ready = await testApp.app.inject({ method: 'GET', url: '/readyz' })
      assert.equal(ready.statusCode, 503)
      assert.equal(errorBody(ready).code, 'unavailable')
      assert.equal((await testApp.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
    })
  })
}
