import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import type { LightMyRequestResponse } from 'fastify'
import type { Scope } from '../src/api-keys/api-keys.scopes.js'
import { GET_PET_SUNSET } from '../src/app.js'
import { main } from '../src/cli.js'
import { ERROR_CODES, ERROR_STATUS } from '../src/errors.js'
import { parseJson } from '../src/http/json-body.js'
import type { Storage } from '../src/storage/storage.js'
import { ENGINES, type Engine, ROOT, buildTestApp, postPet, type TestApp } from './helper.js'

interface Response {
  $ref?: string
  description: string
  content?: Record<string, { schema: Record<string, unknown> }>
  headers?: Record<string, { required?: boolean; description?: string }>
}

interface Operation {
  operationId: string
  description?: string
  deprecated?: boolean
  security?: Record<string, string[]>[]
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema: Record<string, unknown> }[]
  responses: Record<string, Response>
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> }
}

interface Document {
  openapi: string
  servers: { url: string }[]
  security: unknown[]
  paths: Record<string, Record<string, Operation>>
  components: {
    securitySchemes: Record<string, { type: string; scheme: string; description: string }>
    schemas: Record<string, { properties: Record<string, Record<string, unknown>>; required: string[] }>
    responses: Record<string, Response>
  }
}

/** The document as a client's JSON parser sees it: the whole of it, as the service serves it. */
async function servedDocument(testApp: TestApp): Promise<{ text: string; doc: Document }> {
  const response = await testApp.app.inject({ method: 'GET', url: '/v1/openapi.json' })
  assert.equal(response.statusCode, 200)
  return { text: response.body, doc: JSON.parse(response.body) as Document }
}

/** Every operation of the document with its path and method. */
function operationsOf(doc: Document): { path: string; method: string; operation: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
  )
}

/** A response as documented, its `$ref` (to components.responses) resolved. */
function resolved(doc: Document, response: Response): Response {
  if (response.$ref === undefined) return response
  const target = doc.components.responses[response.$ref.replace('#/components/responses/', '')]
  assert.ok(target, `${response.$ref} is not in components.responses`)
  return target
}

/** The `Allow` an operation's 405 says its path answers with. */
function documentedAllow(operation: Operation): string {
  const allow = /`Allow: ([A-Z, ]+)`/.exec(operation.responses['405']?.description ?? '')?.[1]
  assert.ok(allow !== undefined, `${operation.operationId}: its 405 names no Allow`)
  return allow
}

describe('OpenAPI document', () => {
  let testApp: TestApp
  let doc: Document
  before(async () => {
    testApp = await buildTestApp('sqlite', {
      env: { PRODUCTION_BASE_URL: 'https://api.example.org', STAGING_BASE_URL: 'https://staging.example.org/' },
    })
    doc = (await servedDocument(testApp)).doc
  })
  after(() => testApp.close())

  const operation = (id: string): Operation => {
    for (const methods of Object.values(doc.paths)) {
      for (const op of Object.values(methods)) if (op.operationId === id) return op
    }
    throw new Error(`no operation ${id}`)
  }

  it('is OpenAPI 3.1 with both servers, each ending in /v1', () => {
    assert.equal(doc.openapi, '3.1.0')
    assert.deepEqual(
      doc.servers.map((s) => s.url),
      ['https://api.example.org/v1', 'https://staging.example.org/v1'],
    )
  })

  it('requires the bearer scheme everywhere', () => {
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      ...doc.components.securitySchemes.bearerAuth,
      type: 'http',
      scheme: 'bearer',
    })
    assert.deepEqual(doc.security, [{ bearerAuth: [] }])
  })

  it('has exactly the three operations, on paths relative to /v1', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/pets', '/pets/{petId}'])
    assert.equal(doc.paths['/pets']?.get?.operationId, 'listPets')
    assert.equal(doc.paths['/pets']?.post?.operationId, 'createPet')
    assert.equal(doc.paths['/pets/{petId}']?.get?.operationId, 'getPet')
    assert.deepEqual(Object.keys(doc.paths['/pets/{petId}'] ?? {}), ['get'])
  })

  it('marks getPet deprecated and only getPet', () => {
    assert.equal(operation('getPet').deprecated, true)
    assert.equal(operation('listPets').deprecated, undefined)
    assert.equal(operation('createPet').deprecated, undefined)
  })

  it('lists every status each operation can return', () => {
    const statuses = (id: string) => Object.keys(operation(id).responses).sort()
    assert.deepEqual(statuses('listPets'), ['200', '304', '400', '401', '403', '405', '429', '500', '503'])
    assert.deepEqual(statuses('createPet'), ['201', '400', '401', '403', '405', '409', '413', '415', '422', '429', '500', '503'])
    assert.deepEqual(statuses('getPet'), ['200', '304', '400', '401', '403', '404', '405', '410', '429', '500', '503'])
  })

  it('names the scope each operation needs in its security requirement, as OpenAPI 3.1 allows for bearer schemes', () => {
    assert.deepEqual(operation('listPets').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('getPet').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('createPet').security, [{ bearerAuth: ['pets:write'] }])
    assert.match(doc.components.securitySchemes.bearerAuth?.description ?? '', /pets:read.*pets:write.*403 `forbidden`/)
  })

  it('documents limit as an integer from 1 to 100 defaulting to 20, and the status filter', () => {
    const parameters = operation('listPets').parameters ?? []
    const limit = parameters.find((p) => p.name === 'limit')
    assert.deepEqual(limit?.schema, { ...limit?.schema, type: 'integer', minimum: 1, maximum: 100, default: 20 })
    const status = parameters.find((p) => p.name === 'status')
    assert.deepEqual(status?.schema, { $ref: '#/components/schemas/PetStatus' })
    assert.equal(status.description, 'Return only animals with this status.')
  })

  it('names PetStatus as the specification does, and Pet, NewPet and the status filter refer to it', () => {
    assert.deepEqual(Object.keys(doc.components.schemas).sort(), ['Error', 'NewPet', 'Pet', 'PetStatus'])
    assert.deepEqual(doc.components.schemas.PetStatus, {
      ...doc.components.schemas.PetStatus,
      type: 'string',
      enum: ['available', 'pending', 'sold'],
    })
    for (const name of ['Pet', 'NewPet']) {
      assert.deepEqual(doc.components.schemas[name]?.properties.status, { $ref: '#/components/schemas/PetStatus' }, name)
    }
    // Nothing else spells the values out: a client's PetStatus type is the only one.
    const spelt = JSON.stringify(doc).match(/"enum":\["available","pending","sold"\]/g) ?? []
    assert.equal(spelt.length, 1)
  })

  it('caps a page at 100 pets in the list response (maxItems), as limit does', () => {
    const page = operation('listPets').responses['200']?.content?.['application/json']?.schema
    assert.equal(page?.type, 'array')
    assert.equal(page.maxItems, 100)
    const limit = (operation('listPets').parameters ?? []).find((p) => p.name === 'limit')
    assert.equal(limit?.schema.maximum, page.maxItems)
  })

  it('documents pagination: the cursor parameter, the Link header, ETags and 304', () => {
    const list = operation('listPets')
    const cursor = (list.parameters ?? []).find((p) => p.name === 'cursor')
    assert.equal(cursor?.in, 'query')
    assert.equal(cursor?.schema.type, 'string')
    assert.match(JSON.stringify(list.responses['200']?.headers?.Link), /rel=\\"next\\"/)
    for (const id of ['listPets', 'getPet']) {
      const { parameters = [], responses } = operation(id)
      assert.ok(parameters.some((p) => p.name === 'if-none-match' && p.in === 'header'), id)
      assert.ok(responses['200']?.headers?.ETag, id)
      assert.equal(responses['304']?.content, undefined, `${id} 304 has no body`)
    }
  })

  it('documents int64 ids and the Error body with the whole code catalogue', () => {
    const { Pet, NewPet, Error: ErrorSchema } = doc.components.schemas
    assert.ok(Pet && NewPet && ErrorSchema)
    assert.deepEqual(Pet.required.sort(), ['categoryId', 'id', 'name'])
    assert.deepEqual(NewPet.required.sort(), ['categoryId', 'name'])
    assert.deepEqual(ErrorSchema.required.sort(), ['code', 'message', 'status'])
    assert.deepEqual(ErrorSchema.properties.code?.enum, ERROR_CODES)
    assert.equal(JSON.stringify(Pet.properties.id), JSON.stringify({ ...Pet.properties.id, type: 'integer', format: 'int64' }))
  })

  it('documents the 401 challenge and the deprecation headers', () => {
    assert.ok(operation('listPets').responses['401']?.headers?.['WWW-Authenticate'])
    const ok = operation('getPet').responses['200']?.headers ?? {}
    assert.deepEqual(Object.keys(ok).sort(), [
      'Cache-Control',
      'Deprecation',
      'ETag',
      'Link',
      'RateLimit',
      'RateLimit-Policy',
      'Sunset',
    ])
    for (const id of ['listPets', 'createPet']) {
      assert.deepEqual(Object.keys(operation(id).responses['429']?.headers ?? {}).sort(), ['RateLimit', 'RateLimit-Policy', 'Retry-After'])
    }
    // getPet's hooks set the deprecation headers before anything else runs, so every answer has them.
    for (const [status, response] of Object.entries(operation('getPet').responses)) {
      if (status === '405') continue
      for (const name of ['Deprecation', 'Sunset', 'Link']) assert.ok(response.headers?.[name], `getPet ${status} lacks ${name}`)
    }
  })

  it('documents 405 once, as a named response with the Error body and Allow, that every operation refers to', () => {
    const methodNotAllowed = doc.components.responses.MethodNotAllowed
    assert.ok(methodNotAllowed)
    assert.deepEqual(methodNotAllowed.content, { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } })
    assert.equal(methodNotAllowed.headers?.Allow?.required, true)
    assert.match(methodNotAllowed.description, /`method_not_allowed`/)
    for (const { operation: op } of operationsOf(doc)) {
      assert.equal(op.responses['405']?.$ref, '#/components/responses/MethodNotAllowed', op.operationId)
    }
    assert.equal(documentedAllow(operation('listPets')), 'GET, HEAD, POST')
    assert.equal(documentedAllow(operation('createPet')), 'GET, HEAD, POST')
    assert.equal(documentedAllow(operation('getPet')), 'GET, HEAD')
  })

  it('documents HEAD in the description of each GET operation, not as operations of its own', () => {
    for (const { method, operation: op } of operationsOf(doc)) {
      assert.notEqual(method, 'head')
      if (method === 'get') assert.match(op.description ?? '', /Also answers `HEAD`: as `GET`, with the same status and headers, without the body\./)
      else assert.doesNotMatch(op.description ?? '', /HEAD/)
    }
  })

  it('keeps health and the document itself out of the document', () => {
    assert.doesNotMatch(JSON.stringify(Object.keys(doc.paths)), /healthz|readyz|openapi/)
  })

  it('matches the error catalogue table of the README', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
    for (const code of ERROR_CODES) {
      assert.match(readme, new RegExp(`\\| \`${code}\` \\| ${ERROR_STATUS[code]} \\|`), `README lacks ${code}`)
    }
  })
})

describe('OpenAPI document: int64 bounds', () => {
  let testApp: TestApp
  before(async () => {
    testApp = await buildTestApp('sqlite')
  })
  after(() => testApp.close())

  const INT64_MAX = 9223372036854775807n

  /** The bounds as written, read without rounding (JSON.parse would read 9223372036854775808). */
  const boundsOf = (schema: unknown) => {
    const { minimum, maximum } = schema as { minimum?: unknown; maximum?: unknown }
    return { minimum, maximum }
  }

  it('bounds id, categoryId and petId from 1 to 9223372036854775807, every digit written', async () => {
    const { text } = await servedDocument(testApp)
    const doc = parseJson(text) as {
      components: { schemas: Record<string, { properties: Record<string, unknown> }> }
      paths: Record<string, Record<string, { parameters?: { name: string; schema: unknown }[] }>>
    }
    const { Pet, NewPet } = doc.components.schemas
    const petId = doc.paths['/pets/{petId}']?.get?.parameters?.find((p) => p.name === 'petId')
    for (const [what, schema] of [
      ['Pet.id', Pet?.properties.id],
      ['Pet.categoryId', Pet?.properties.categoryId],
      ['NewPet.categoryId', NewPet?.properties.categoryId],
      ['petId', petId?.schema],
    ] as const) {
      assert.deepEqual(boundsOf(schema), { minimum: 1n, maximum: INT64_MAX }, what)
    }
  })

  it('writes them exactly in what `petstore openapi` prints too (what the linter and the client generator read)', async () => {
    let stdout = ''
    const outcome = await main(['openapi'], { env: { LOG_LEVEL: 'silent' }, cwd: ROOT, stdout: (text) => (stdout += text), stderr: () => {} })
    assert.equal(outcome, 0)
    assert.equal(stdout.match(/"maximum": 9223372036854775807\b/g)?.length, 4)
    assert.doesNotMatch(stdout, /922337203685477[0-9]{4}(?<!5807)\b/)
  })
})

/** What the storage does when the test says so: fail as a bug would, or as an outage does. */
interface Faults {
  fault: 'none' | 'bug' | 'outage'
  /** While armed, the next keyed create waits until `release` is called: a request really in progress. */
  holdNextKeyedCreate(): { entered: Promise<void>; release: () => void }
}

function outageError(engine: Engine): Error {
  return engine === 'sqlite'
    ? new Sqlite.SqliteError('database or disk is full', 'SQLITE_FULL')
    : Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
}

function faultyStorage(engine: Engine): { faults: Faults; wrap: (storage: Storage) => Storage } {
  let hold: { entered: () => void; released: Promise<void> } | undefined
  const faults: Faults = {
    fault: 'none',
    holdNextKeyedCreate() {
      let entered!: () => void
      let release!: () => void
      const held = { entered: new Promise<void>((resolve) => (entered = resolve)), release: () => release() }
      hold = { entered, released: new Promise<void>((resolve) => (release = resolve)) }
      return held
    },
  }
  const failing = async <T>(call: () => Promise<T>): Promise<T> => {
    if (faults.fault === 'bug') throw new Error('a bug')
    if (faults.fault === 'outage') throw outageError(engine)
    return call()
  }
  const wrap = (storage: Storage): Storage => ({
    ...storage,
    pets: {
      ...storage.pets,
      list: (...args) => failing(() => storage.pets.list(...args)),
      create: (...args) => failing(() => storage.pets.create(...args)),
      findById: (...args) => failing(() => storage.pets.findById(...args)),
    },
    idempotency: {
      ...storage.idempotency,
      async createPet(...args) {
        const held = hold
        hold = undefined
        if (held !== undefined) {
          held.entered()
          await held.released
        }
        return storage.idempotency.createPet(...args)
      },
    },
    isUnavailable: (error) => storage.isUnavailable(error),
  })
  return { faults, wrap }
}

/**
 * Headers whose presence depends on the response: for each, the document must list it on exactly
 * the responses that carry it on the wire. (Cache-Control and X-Request-Id are on every one.)
 */
const CONDITIONAL_HEADERS = ['RateLimit', 'RateLimit-Policy', 'Retry-After', 'WWW-Authenticate', 'Allow', 'Deprecation', 'Sunset']

const RATE_LIMIT_PER_KEY = 10

for (const engine of ENGINES) {
  describe(`OpenAPI document against the wire on ${engine}`, () => {
    let testApp: TestApp
    let doc: Document
    const { faults, wrap } = faultyStorage(engine)
    before(async () => {
      testApp = await buildTestApp(engine, { env: { RATE_LIMIT_PER_KEY: String(RATE_LIMIT_PER_KEY) }, storage: wrap })
      doc = (await servedDocument(testApp)).doc
    })
    after(() => testApp.close())

    type Send = (key: string) => Promise<LightMyRequestResponse>
    const get = (url: string, headers: Record<string, string> = {}): Send => (key) => testApp.request(key, { method: 'GET', url, headers })
    const post = (payload: string, headers: Record<string, string> = {}): Send => (key) =>
      testApp.request(key, { method: 'POST', url: '/v1/pets', headers: { 'content-type': 'application/json', ...headers }, payload })
    const valid = '{"name":"Wire","categoryId":1}'
    const newPetId = async (key: string) => (JSON.parse((await postPet(testApp, key, valid)).body) as { id: number }).id
    const withFault = (fault: Faults['fault'], send: Send): Send => async (key) => {
      faults.fault = fault
      try {
        return await send(key)
      } finally {
        faults.fault = 'none'
      }
    }
    const unchanged = (url: string): Send => async (key) => {
      const first = await testApp.request(key, { method: 'GET', url })
      return get(url, { 'if-none-match': String(first.headers.etag) })(key)
    }
    const overTheLimit = (send: Send): Send => async (key) => {
      for (let i = 0; i < RATE_LIMIT_PER_KEY; i++) await send(key)
      return send(key)
    }
    const withoutKey = (method: 'GET' | 'POST', url: string): Send => () => testApp.app.inject({ method, url })
    const withOnly = (scope: Scope, send: Send): Send => async () => send(await testApp.createKey({ scopes: [scope] }))

    /** How to get each documented response on the wire, each with a key of its own. */
    const recipes: Record<string, Send> = {
      'listPets 200': get('/v1/pets'),
      'listPets 304': unchanged('/v1/pets'),
      'listPets 400': get('/v1/pets?limit=0'),
      'listPets 401': withoutKey('GET', '/v1/pets'),
      'listPets 403': withOnly('pets:write', get('/v1/pets')),
      'listPets 405': (key) => testApp.request(key, { method: 'DELETE', url: '/v1/pets' }),
      'listPets 429': overTheLimit(get('/v1/pets')),
      // A limit no other request uses, so that the answer cannot come from the read cache.
      'listPets 500': withFault('bug', get('/v1/pets?limit=3')),
      'listPets 503': withFault('outage', get('/v1/pets?limit=4')),
      'createPet 201': post(valid),
      'createPet 400': post('{"name":'),
      'createPet 401': withoutKey('POST', '/v1/pets'),
      'createPet 403': withOnly('pets:read', post(valid)),
      'createPet 405': (key) => testApp.request(key, { method: 'PATCH', url: '/v1/pets' }),
      'createPet 409': async (key) => {
        const held = faults.holdNextKeyedCreate()
        const first = post(valid, { 'idempotency-key': 'wire-409' })(key)
        await held.entered
        try {
          return await post(valid, { 'idempotency-key': 'wire-409' })(key)
        } finally {
          held.release()
          await first
        }
      },
      'createPet 413': post(valid + ' '.repeat(16 * 1024)),
      'createPet 415': post(valid, { 'content-type': 'text/plain' }),
      'createPet 422': async (key) => {
        await post(valid, { 'idempotency-key': 'wire-422' })(key)
        return post('{"name":"Other","categoryId":1}', { 'idempotency-key': 'wire-422' })(key)
      },
      'createPet 429': overTheLimit(post(valid)),
      'createPet 500': withFault('bug', post(valid)),
      'createPet 503': withFault('outage', post(valid)),
      'getPet 200': async (key) => get(`/v1/pets/${await newPetId(key)}`)(key),
      'getPet 304': async (key) => unchanged(`/v1/pets/${await newPetId(key)}`)(key),
      'getPet 400': get('/v1/pets/abc'),
      'getPet 401': withoutKey('GET', '/v1/pets/1'),
      'getPet 403': withOnly('pets:write', get('/v1/pets/1')),
      'getPet 404': get('/v1/pets/999999'),
      'getPet 405': (key) => testApp.request(key, { method: 'DELETE', url: '/v1/pets/1' }),
      'getPet 410': async (key) => {
        const now = testApp.clock.ms
        testApp.clock.ms = GET_PET_SUNSET.getTime()
        try {
          return await get('/v1/pets/1')(key)
        } finally {
          testApp.clock.ms = now
        }
      },
      'getPet 429': overTheLimit(get('/v1/pets/1')),
      'getPet 500': withFault('bug', get('/v1/pets/999998')),
      'getPet 503': withFault('outage', get('/v1/pets/999997')),
    }

    it('has a way to get every documented response on the wire, and no other', () => {
      const documented = operationsOf(doc).flatMap(({ operation: op }) => Object.keys(op.responses).map((status) => `${op.operationId} ${status}`))
      assert.deepEqual(documented.sort(), Object.keys(recipes).sort())
    })

    it('lists RateLimit, RateLimit-Policy and the other conditional headers on exactly the responses that carry them', async () => {
      const disagreements: string[] = []
      for (const { operation: op } of operationsOf(doc)) {
        for (const [status, documentedResponse] of Object.entries(op.responses)) {
          const send = recipes[`${op.operationId} ${status}`]
          assert.ok(send, `${op.operationId} ${status}: no recipe`)
          const response = await send(await testApp.createKey())
          assert.equal(String(response.statusCode), status, `${op.operationId} ${status}: ${response.body}`)
          const documentedHeaders = Object.keys(resolved(doc, documentedResponse).headers ?? {})
          for (const name of CONDITIONAL_HEADERS) {
            const onTheWire = response.headers[name.toLowerCase()] !== undefined
            if (onTheWire !== documentedHeaders.includes(name)) {
              disagreements.push(`${op.operationId} ${status} ${name}: ${onTheWire ? 'sent but not documented' : 'documented but not sent'}`)
            }
          }
        }
      }
      assert.deepEqual(disagreements, [])
    })

    it('answers each method a path lacks with 405 and the Allow its operations document, with or without a key', async () => {
      const key = await testApp.createKey()
      for (const { path: documentedPath, operation: op } of operationsOf(doc)) {
        const allow = documentedAllow(op)
        const url = `/v1${documentedPath.replace('{petId}', '1')}`
        for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
          if (allow.split(', ').includes(method)) continue
          for (const response of [await testApp.request(key, { method, url }), await testApp.app.inject({ method, url })]) {
            assert.equal(response.statusCode, 405, `${method} ${url}`)
            assert.equal(response.headers.allow, allow, `${method} ${url}`)
            assert.equal((JSON.parse(response.body) as { code: string }).code, 'method_not_allowed')
          }
        }
      }
    })

    it('answers HEAD on each GET operation as GET, with the same status and headers, without the body', async () => {
      const key = await testApp.createKey()
      const id = await newPetId(key)
      for (const url of ['/v1/pets?limit=1', `/v1/pets/${id}`, '/v1/pets/999996', '/v1/pets?limit=0']) {
        const viaGet = await testApp.request(key, { method: 'GET', url })
        const viaHead = await testApp.request(key, { method: 'HEAD', url })
        assert.equal(viaHead.statusCode, viaGet.statusCode, url)
        assert.equal(viaHead.body, '', url)
        const names = (response: LightMyRequestResponse) => Object.keys(response.headers).sort()
        assert.deepEqual(names(viaHead), names(viaGet), url)
        assert.equal(viaHead.headers.etag, viaGet.headers.etag, url)
        assert.equal(viaHead.headers['content-length'], viaGet.headers['content-length'], url)
      }
    })
  })
}
