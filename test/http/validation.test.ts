import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { DIRECT_ENGINES, errorBody, listPetsText, postPet, useTestApp } from '../helper.js'

const BODY_LIMIT = 16 * 1024

/** A valid create body padded with trailing white space to exactly `bytes` bytes. */
function paddedBody(bytes: number): string {
  const body = '{"name":"Padded","categoryId":1}'
  return body + ' '.repeat(bytes - Buffer.byteLength(body))
}

interface Rejection {
  /** What the client did wrong, as the test name says it. */
  what: string
  body: string
  /** A quoted property name the message must contain. */
  names?: string
}

const nameRejections: Rejection[] = [
  { what: 'a missing name', body: '{"categoryId":1}', names: 'name' },
  { what: 'a name sent as a number', body: '{"name":123,"categoryId":1}', names: 'name' },
  { what: 'a null name', body: '{"name":null,"categoryId":1}', names: 'name' },
  { what: 'an empty name', body: '{"name":"","categoryId":1}', names: 'name' },
  { what: 'a name of spaces only', body: '{"name":"   ","categoryId":1}', names: 'name' },
  { what: 'a name of a tab and a newline only', body: '{"name":"\\t\\n","categoryId":1}', names: 'name' },
  { what: 'a name of 201 characters', body: JSON.stringify({ name: 'x'.repeat(201), categoryId: 1 }), names: 'name' },
  { what: 'a name of 201 emoji', body: JSON.stringify({ name: '🐕'.repeat(201), categoryId: 1 }), names: 'name' },
  // UTF-8 cannot encode it: the database would keep something other than what the 201 echoed.
  { what: 'a name holding an unpaired surrogate', body: '{"name":"Rex\\ud800","categoryId":1}', names: 'name' },
  { what: 'a name holding U+0000, which PostgreSQL cannot store', body: '{"name":"Rex\\u0000","categoryId":1}', names: 'name' },
]

const categoryIdRejections: Rejection[] = [
  { what: 'a missing categoryId', body: '{"name":"a"}', names: 'categoryId' },
  { what: 'a categoryId sent as a string', body: '{"name":"a","categoryId":"5"}', names: 'categoryId' },
  { what: 'a fractional categoryId', body: '{"name":"a","categoryId":1.5}', names: 'categoryId' },
  { what: 'a categoryId written as 1.0', body: '{"name":"a","categoryId":1.0}', names: 'categoryId' },
  { what: 'a categoryId written with an exponent', body: '{"name":"a","categoryId":1e1}', names: 'categoryId' },
  { what: 'a boolean categoryId', body: '{"name":"a","categoryId":true}', names: 'categoryId' },
  { what: 'a null categoryId', body: '{"name":"a","categoryId":null}', names: 'categoryId' },
  { what: 'a categoryId of 0', body: '{"name":"a","categoryId":0}', names: 'categoryId' },
  { what: 'a negative categoryId', body: '{"name":"a","categoryId":-1}', names: 'categoryId' },
  { what: 'a categoryId sent as an object', body: '{"name":"a","categoryId":{}}', names: 'categoryId' },
  { what: 'a categoryId sent as an array', body: '{"name":"a","categoryId":[]}', names: 'categoryId' },
  { what: 'a categoryId with a leading zero (not valid JSON)', body: '{"name":"a","categoryId":01}' },
]

const statusRejections: Rejection[] = [
  { what: 'a status in capitals', body: '{"name":"a","categoryId":1,"status":"AVAILABLE"}', names: 'status' },
  { what: 'an unknown status', body: '{"name":"a","categoryId":1,"status":"lost"}', names: 'status' },
  { what: 'an empty status', body: '{"name":"a","categoryId":1,"status":""}', names: 'status' },
  { what: 'a null status', body: '{"name":"a","categoryId":1,"status":null}', names: 'status' },
  { what: 'a numeric status', body: '{"name":"a","categoryId":1,"status":1}', names: 'status' },
]

const unknownPropertyRejections: Rejection[] = [
  { what: 'a misspelt property', body: '{"name":"a","categoryId":1,"stauts":"sold"}', names: 'stauts' },
  { what: 'a client-sent id', body: '{"id":7,"name":"a","categoryId":1}', names: 'id' },
  {
    what: 'a constructor property',
    body: '{"name":"a","categoryId":1,"constructor":{"prototype":{"polluted":true}}}',
    names: 'constructor',
  },
]

const wholeBodyRejections: Rejection[] = [
  { what: 'malformed JSON', body: '{"name":' },
  { what: 'an empty body', body: '' },
  { what: 'a body of white space only', body: ' \t\r\n ' },
  { what: 'an array body', body: '[]' },
  { what: 'a null body', body: 'null' },
  { what: 'a string body', body: '"text"' },
  { what: 'a number body', body: '42' },
  { what: 'trailing garbage after the object', body: '{"name":"a","categoryId":1} x' },
  { what: 'a duplicate key with different values', body: '{"name":"a","name":"b","categoryId":1}' },
  {
    what: 'nesting 1000 levels deep',
    body: `{"name":"a","categoryId":1,"deep":${'['.repeat(1000)}${']'.repeat(1000)}}`,
  },
]

for (const engine of DIRECT_ENGINES) {
  describe(`createPet validation on ${engine}`, () => {
    const fx = useTestApp(engine)

    const petCount = async (): Promise<number> => {
      const count = (JSON.parse(await listPetsText(fx.testApp, fx.key)) as unknown[]).length
      assert.ok(count < 100, 'the suite must stay under one page of pets for counts to be exact')
      return count
    }

    /** Runs `send`, asserts the error and that nothing was stored, and returns the error body. */
    const assertRejected = async (
      send: () => Promise<LightMyRequestResponse>,
      status: number,
      code: string,
      names?: string,
    ): Promise<ReturnType<typeof errorBody>> => {
      const before = await petCount()
      const response = await send()
      assert.equal(response.statusCode, status, response.body)
      const body = errorBody(response)
      assert.equal(body.code, code)
      if (names !== undefined) {
        assert.ok(body.message.includes(`'${names}'`), `message does not name '${names}': ${body.message}`)
      }
      assert.equal(await petCount(), before, 'a rejected create stored a pet')
      return body
    }

    /** Asserts a 201 whose pet, and the pet fetched back, equal `sent` plus an id. */
    const assertStored = async (response: LightMyRequestResponse, sent: Record<string, unknown>): Promise<void> => {
      assert.equal(response.statusCode, 201, response.body)
      const pet = JSON.parse(response.body) as { id: number }
      assert.deepEqual(pet, { id: pet.id, ...sent })
      const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${pet.id}` })
      assert.equal(fetched.statusCode, 200, fetched.body)
      assert.deepEqual(JSON.parse(fetched.body), pet)
    }

    const rejectAll = (rejections: Rejection[]): void => {
      for (const { what, body, names } of rejections) {
        it(`rejects ${what} with 400 invalid_request${names === undefined ? '' : ` naming '${names}'`}`, async () => {
          await assertRejected(() => postPet(fx.testApp, fx.key, body), 400, 'invalid_request', names)
        })
      }
    }

    describe('name', () => {
      rejectAll(nameRejections)

      it('accepts a name of 200 characters and stores it exactly', async () => {
        const name = 'n'.repeat(200)
        await assertStored(await postPet(fx.testApp, fx.key, JSON.stringify({ name, categoryId: 1 })), { name, categoryId: 1 })
      })

      it('counts Unicode characters, not UTF-16 units: accepts a name of 200 emoji', async () => {
        const name = '🐕'.repeat(200)
        assert.equal(name.length, 400)
        await assertStored(await postPet(fx.testApp, fx.key, JSON.stringify({ name, categoryId: 1 })), { name, categoryId: 1 })
      })

      it('stores a name with leading and trailing spaces unchanged', async () => {
        const name = '  Rex  '
        await assertStored(await postPet(fx.testApp, fx.key, JSON.stringify({ name, categoryId: 1 })), { name, categoryId: 1 })
      })
    })

    describe('categoryId', () => {
      rejectAll(categoryIdRejections)

      it('accepts a categoryId of 1', async () => {
        await assertStored(await postPet(fx.testApp, fx.key, '{"name":"One","categoryId":1}'), { name: 'One', categoryId: 1 })
      })
    })

    describe('status', () => {
      rejectAll(statusRejections)

      for (const status of ['available', 'pending', 'sold'] as const) {
        it(`accepts status ${status} and stores it`, async () => {
          const response = await postPet(fx.testApp, fx.key, `{"name":"S","categoryId":2,"status":"${status}"}`)
          await assertStored(response, { name: 'S', categoryId: 2, status })
        })
      }
    })

    describe('unknown properties', () => {
      rejectAll(unknownPropertyRejections)

      it("rejects a __proto__ property with 400 naming '__proto__' and leaves Object.prototype untouched", async () => {
        const body = '{"name":"a","categoryId":1,"__proto__":{"polluted":true}}'
        await assertRejected(() => postPet(fx.testApp, fx.key, body), 400, 'invalid_request', '__proto__')
        assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted'), false)
        assert.equal((Object.create(Object.prototype) as Record<string, unknown>).polluted, undefined)
      })
    })

    describe('whole body', () => {
      rejectAll(wholeBodyRejections)

      it('rejects a body that is not valid UTF-8 with 400 invalid_request', async () => {
        const invalidUtf8 = Buffer.from([0xff, 0xfe, 0xc3])
        const payload = Buffer.concat([Buffer.from('{"name":"'), invalidUtf8, Buffer.from('","categoryId":1}')])
        const send = () =>
          fx.testApp.request(fx.key, { method: 'POST', url: '/v1/pets', headers: { 'content-type': 'application/json' }, payload })
        await assertRejected(send, 400, 'invalid_request')
      })
    })

    describe('content type', () => {
      const post = (headers: Record<string, string>, payload?: string): Promise<LightMyRequestResponse> => {
        const options: InjectOptions = { method: 'POST', url: '/v1/pets', headers }
        if (payload !== undefined) options.payload = payload
        return fx.testApp.request(fx.key, options)
      }
      const valid = '{"name":"Typed","categoryId":3}'

      it('rejects a request with no body and no content-type with 400 saying a body is required', async () => {
        const { message } = await assertRejected(() => post({}), 400, 'invalid_request')
        assert.match(message, /body is required/)
      })

      it('rejects a JSON body sent without a content-type with 415 unsupported_media_type', async () => {
        await assertRejected(() => post({}, valid), 415, 'unsupported_media_type')
      })

      for (const contentType of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/json; charset=latin1',
        'application/json; charset=utf-8; charset=latin1',
        'application/jsonx',
      ]) {
        it(`rejects a JSON body sent as ${contentType} with 415 unsupported_media_type`, async () => {
          await assertRejected(() => post({ 'content-type': contentType }, valid), 415, 'unsupported_media_type')
        })
      }

      for (const coding of ['gzip', 'br, deflate', 'GZIP', 'identity, gzip']) {
        it(`rejects a body sent with Content-Encoding: ${coding} with 415 unsupported_content_encoding and Accept-Encoding: identity`, async () => {
          let response: LightMyRequestResponse | undefined
          await assertRejected(
            async () => (response = await post({ 'content-type': 'application/json', 'content-encoding': coding }, valid)),
            415,
            'unsupported_content_encoding',
          )
          assert.equal(response?.headers['accept-encoding'], 'identity')
        })
      }

      it('rejects a body that really is gzip with 415, not 400 for its bytes', async () => {
        const response = await post({ 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(valid).toString('latin1'))
        assert.equal(response.statusCode, 415, response.body)
        assert.equal(errorBody(response).code, 'unsupported_content_encoding')
      })

      it('accepts Content-Encoding: identity, as if none were sent', async () => {
        const response = await post({ 'content-type': 'application/json', 'content-encoding': 'Identity' }, valid)
        await assertStored(response, { name: 'Typed', categoryId: 3 })
      })

      it('accepts application/json; charset=utf-8', async () => {
        const response = await post({ 'content-type': 'application/json; charset=utf-8' }, valid)
        await assertStored(response, { name: 'Typed', categoryId: 3 })
      })
    })

    describe('size', () => {
      it('rejects a body of 16 KiB + 1 byte of white-space padding with 413 payload_too_large', async () => {
        await assertRejected(() => postPet(fx.testApp, fx.key, paddedBody(BODY_LIMIT + 1)), 413, 'payload_too_large')
      })

      it('rejects a body of 16 KiB + 1 byte carrying a big unknown property with 413, not 400', async () => {
        const head = '{"name":"a","categoryId":1,"big":"'
        const body = head + 'x'.repeat(BODY_LIMIT + 1 - Buffer.byteLength(head) - 2) + '"}'
        assert.equal(Buffer.byteLength(body), BODY_LIMIT + 1)
        await assertRejected(() => postPet(fx.testApp, fx.key, body), 413, 'payload_too_large')
      })

      for (const bytes of [BODY_LIMIT - 1, BODY_LIMIT]) {
        it(`accepts a valid body padded to ${bytes} bytes`, async () => {
          const body = paddedBody(bytes)
          assert.equal(Buffer.byteLength(body), bytes)
          await assertStored(await postPet(fx.testApp, fx.key, body), { name: 'Padded', categoryId: 1 })
        })
      }
    })
  })

  describe(`listPets and getPet validation on ${engine}`, () => {
    const fx = useTestApp(engine)
    before(async () => {
      for (let i = 0; i < 3; i++) {
        assert.equal((await postPet(fx.testApp, fx.key, `{"name":"p${i}","categoryId":1,"status":"sold"}`)).statusCode, 201)
      }
    })

    const get = (url: string) => fx.testApp.request(fx.key, { method: 'GET', url })

    const badQueries: [what: string, query: string, names: string][] = [
      ['a limit of 0', '?limit=0', 'limit'],
      ['a limit of 101', '?limit=101', 'limit'],
      ['a negative limit', '?limit=-1', 'limit'],
      ['a non-numeric limit', '?limit=abc', 'limit'],
      ['a fractional limit', '?limit=1.5', 'limit'],
      ['a limit with an exponent', '?limit=1e1', 'limit'],
      ['an empty limit', '?limit=', 'limit'],
      ['a limit without a value', '?limit', 'limit'],
      ['a repeated limit', '?limit=5&limit=6', 'limit'],
      ['a limit with a plus sign', '?limit=%2B5', 'limit'],
      ['a limit with a form-encoded plus (a space)', '?limit=+5', 'limit'],
      ['a limit with a leading zero', '?limit=05', 'limit'],
      ['a limit with a leading space', '?limit=%205', 'limit'],
      ['an unknown status', '?status=lost', 'status'],
      ['an empty status', '?status=', 'status'],
      ['a repeated status, even with the same value', '?status=sold&status=sold', 'status'],
      ['a status in another case', '?status=Sold', 'status'],
      ['an unknown query parameter', '?foo=1', 'foo'],
    ]
    for (const [what, query, names] of badQueries) {
      it(`rejects ${what} (${query}) with 400 naming '${names}'`, async () => {
        const response = await get(`/v1/pets${query}`)
        assert.equal(response.statusCode, 400, response.body)
        const body = errorBody(response)
        assert.equal(body.code, 'invalid_request')
        assert.ok(body.message.includes(`'${names}'`), `message does not name '${names}': ${body.message}`)
      })
    }

    for (const [limit, expected] of [
      ['1', 1],
      ['100', 3],
    ] as const) {
      it(`accepts limit=${limit} with 200`, async () => {
        const response = await get(`/v1/pets?limit=${limit}`)
        assert.equal(response.statusCode, 200, response.body)
        assert.equal((JSON.parse(response.body) as unknown[]).length, expected)
      })
    }

    for (const petId of ['abc', '0', '-1', '1.5', '1e3', '01', '9223372036854775808', '99999999999999999999999']) {
      it(`rejects petId ${petId} with 400 invalid_request naming 'petId'`, async () => {
        const response = await get(`/v1/pets/${petId}`)
        assert.equal(response.statusCode, 400, response.body)
        const body = errorBody(response)
        assert.equal(body.code, 'invalid_request')
        assert.ok(body.message.includes("'petId'"), `message does not name 'petId': ${body.message}`)
      })
    }

    describe('getPet query parameters', () => {
      let url: string
      before(async () => {
        const [pet] = JSON.parse(await listPetsText(fx.testApp, fx.key)) as { id: number }[]
        assert.ok(pet)
        url = `/v1/pets/${pet.id}`
      })

      for (const [what, query, names] of [
        ['an unknown query parameter', '?x=1', 'x'],
        ['a query parameter without a value', '?x', 'x'],
        ['a listPets parameter, which getPet does not take', '?limit=5', 'limit'],
      ] as const) {
        it(`rejects ${what} (${query}) on a pet that exists with 400 naming '${names}'`, async () => {
          const response = await get(`${url}${query}`)
          assert.equal(response.statusCode, 400, response.body)
          const body = errorBody(response)
          assert.equal(body.code, 'invalid_request')
          assert.ok(body.message.includes(`'${names}'`), `message does not name '${names}': ${body.message}`)
        })
      }

      it('words the refusal as listPets does', async () => {
        const onGetPet = errorBody(await get(`${url}?stauts=sold`))
        const onListPets = errorBody(await get('/v1/pets?stauts=sold'))
        assert.equal(onGetPet.message, onListPets.message)
        assert.equal(onGetPet.message, "Invalid query parameters: unknown parameter 'stauts'.")
      })

      it('names every unknown parameter', async () => {
        const { message } = errorBody(await get(`${url}?a=1&b=2`))
        assert.ok(message.includes("'a'") && message.includes("'b'"), message)
      })

      it('accepts an empty query string (a lone ?)', async () => {
        assert.equal((await get(`${url}?`)).statusCode, 200)
      })
    })

    it('answers 404 not_found for a well-formed id no pet has', async () => {
      const response = await get('/v1/pets/424242')
      assert.equal(response.statusCode, 404, response.body)
      assert.equal(errorBody(response).code, 'not_found')
    })
  })

  describe(`createPet query parameters on ${engine}`, () => {
    const fx = useTestApp(engine)
    const valid = '{"name":"Queried","categoryId":1}'
    const create = (key: string, query: string, headers: Record<string, string> = {}) =>
      fx.testApp.request(key, { method: 'POST', url: `/v1/pets${query}`, headers: { 'content-type': 'application/json', ...headers }, payload: valid })
    const count = async () => (JSON.parse(await listPetsText(fx.testApp, fx.key)) as unknown[]).length

    // Each would once have been answered 201 with the parameter dropped: `status` silently lost.
    const refused: [what: string, query: string, names: string[]][] = [
      ['a status, which belongs in the body', '?status=sold', ['status']],
      ['a name, which belongs in the body', '?name=x', ['name']],
      ['a parameter without a value', '?a', ['a']],
      ['a repeated parameter', '?a=1&a=2', ['a']],
      ['two parameters', '?a&b', ['a', 'b']],
      ['a percent-encoded name', '?%73tatus=sold', ['status']],
      ['a name with an encoded space', '?pet%20name=x', ['pet name']],
      ['a name that is not UTF-8', '?%FF=1', ['%FF']],
      ['an empty name', '?=x', ['']],
      ['a listPets parameter, which createPet does not take', '?limit=5', ['limit']],
      ['an Idempotency-Key sent as a parameter instead of a header', '?idempotency-key=k1', ['idempotency-key']],
    ]
    for (const [what, query, names] of refused) {
      it(`refuses ${what} (${query}) with 400 naming ${names.map((name) => `'${name}'`).join(' and ')}, and stores nothing`, async () => {
        const before = await count()
        const response = await create(fx.key, query)
        assert.equal(response.statusCode, 400, response.body)
        const body = errorBody(response)
        assert.equal(body.code, 'invalid_request')
        for (const name of names) assert.ok(body.message.includes(`unknown parameter '${name}'`), body.message)
        assert.equal(await count(), before)
      })
    }

    it('words the refusal as listPets and getPet do', async () => {
      const onCreatePet = errorBody(await create(fx.key, '?stauts=sold'))
      const onListPets = errorBody(await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?stauts=sold' }))
      assert.equal(onCreatePet.message, onListPets.message)
      assert.equal(onCreatePet.message, "Invalid query parameters: unknown parameter 'stauts'.")
    })

    it('refuses a parameter on a create with an Idempotency-Key without spending the key: the retry without it creates the pet', async () => {
      const before = await count()
      assert.equal((await create(fx.key, '?status=sold', { 'idempotency-key': 'query-refused' })).statusCode, 400)
      assert.equal(await count(), before)
      const retry = await create(fx.key, '', { 'idempotency-key': 'query-refused' })
      assert.equal(retry.statusCode, 201, retry.body)
      assert.equal(retry.headers['idempotent-replayed'], undefined)
      assert.equal(await count(), before + 1)
    })

    it('answers a parameter from a client without a key with 401, and from a read-only key with 403, before the 400', async () => {
      const before = await count()
      const anonymous = await fx.testApp.app.inject({ method: 'POST', url: '/v1/pets?status=sold', headers: { 'content-type': 'application/json' }, payload: valid })
      assert.equal(anonymous.statusCode, 401, anonymous.body)
      const readOnly = await create(await fx.testApp.createKey({ scopes: ['pets:read'] }), '?status=sold')
      assert.equal(readOnly.statusCode, 403, readOnly.body)
      assert.equal(await count(), before)
    })

    for (const query of ['?', '?&']) {
      it(`creates the pet for an empty query string (${query}), which carries no parameter, as getPet accepts it`, async () => {
        const before = await count()
        const response = await create(fx.key, query)
        assert.equal(response.statusCode, 201, response.body)
        assert.equal(await count(), before + 1)
      })
    }
  })

  describe(`authentication before validation on ${engine}`, () => {
    const fx = useTestApp(engine)

    const post = (payload: string, contentType = 'application/json'): InjectOptions => ({
      method: 'POST',
      url: '/v1/pets',
      headers: { 'content-type': contentType },
      payload,
    })
    const badRequests: [what: string, options: InjectOptions][] = [
      ['malformed JSON', post('{"name":')],
      ['an invalid field', post('{"name":"a","categoryId":"5"}')],
      ['an unknown property', post('{"name":"a","categoryId":1,"x":1}')],
      ['no body at all', { method: 'POST', url: '/v1/pets' }],
      ['a text/plain body', post('{"name":"a","categoryId":1}', 'text/plain')],
      ['a latin1 JSON body', post('{"name":"a","categoryId":1}', 'application/json; charset=latin1')],
      ['an oversized body', post(paddedBody(BODY_LIMIT + 1))],
      ['a bad limit', { method: 'GET', url: '/v1/pets?limit=0' }],
      ['an unknown query parameter', { method: 'GET', url: '/v1/pets?foo=1' }],
      ['a bad petId', { method: 'GET', url: '/v1/pets/abc' }],
      ['an unknown query parameter on getPet', { method: 'GET', url: '/v1/pets/1?x=1' }],
    ]
    for (const [what, options] of badRequests) {
      it(`answers ${what} sent without a key with 401 unauthorized`, async () => {
        const response = await fx.testApp.app.inject(options)
        assert.equal(response.statusCode, 401, response.body)
        assert.equal(errorBody(response).code, 'unauthorized')
      })

      it(`answers ${what} sent with an unknown key with 401 unauthorized`, async () => {
        const response = await fx.testApp.request('ps_live_not_a_real_key', options)
        assert.equal(response.statusCode, 401, response.body)
        assert.equal(errorBody(response).code, 'unauthorized')
      })
    }

    it('stores nothing from unauthenticated creates', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=100' })
      assert.equal(response.body, '[]')
    })
  })
}
