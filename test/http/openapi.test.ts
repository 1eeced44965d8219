import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Sqlite from 'better-sqlite3'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { SCOPES, type Scope } from '../../src/api-keys/api-keys.scopes.js'
import { KEYS_HELP } from '../../src/api-keys/keys.cli.js'
import { GET_PET_SUNSET } from '../../src/deprecations/deprecations.policy.js'
import { main } from '../../src/cli.js'
import { ERROR_CODES, ERROR_STATUS } from '../../src/errors.js'
import { ERROR_MESSAGE_MAX_LENGTH } from '../../src/http/error-schema.js'
import { MAX_HEADER_LINES } from '../../src/http/http-protocol.js'
import { parseJson } from '../../src/http/json-body.js'
import type { Storage } from '../../src/repositories.js'
import { DIRECT_ENGINES, type Engine, ROOT, buildTestApp, type TestApp } from '../helper.js'

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
    headers?: Record<string, { required?: boolean; schema?: Record<string, unknown> }>
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

  it('has exactly the three operations and the HEAD of each GET, on paths relative to /v1', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/pets', '/pets/{petId}'])
    assert.equal(doc.paths['/pets']?.get?.operationId, 'listPets')
    assert.equal(doc.paths['/pets']?.head?.operationId, 'headListPets')
    assert.equal(doc.paths['/pets']?.post?.operationId, 'createPet')
    assert.equal(doc.paths['/pets/{petId}']?.get?.operationId, 'getPet')
    assert.equal(doc.paths['/pets/{petId}']?.head?.operationId, 'headGetPet')
    assert.deepEqual(Object.keys(doc.paths['/pets/{petId}'] ?? {}).sort(), ['get', 'head'])
  })

  it('marks getPet and its HEAD deprecated, and only them', () => {
    assert.equal(operation('getPet').deprecated, true)
    assert.equal(operation('headGetPet').deprecated, true)
    for (const id of ['listPets', 'headListPets', 'createPet']) assert.equal(operation(id).deprecated, undefined, id)
  })

  it('labels no operation experimental or beta: no extension attribute, as the specification labels none', () => {
    for (const { method, path: route, operation: op } of operationsOf(doc)) {
      assert.deepEqual(Object.keys(op).filter((key) => key.startsWith('x-')), [], `${method} ${route}`)
    }
  })

  it('lists every status each operation can return', () => {
    const statuses = (id: string) => Object.keys(operation(id).responses).sort()
    // 405, 408, 417 and 431 come before routing: any request to any operation can get them.
    assert.deepEqual(statuses('listPets'), ['200', '304', '400', '401', '403', '405', '408', '417', '429', '431', '500', '503'])
    assert.deepEqual(statuses('createPet'), ['201', '400', '401', '403', '405', '408', '409', '413', '415', '417', '422', '429', '431', '500', '503'])
    assert.deepEqual(statuses('getPet'), ['200', '304', '400', '401', '403', '404', '405', '408', '410', '417', '429', '431', '500', '503'])
    assert.deepEqual(statuses('headListPets'), statuses('listPets'))
    assert.deepEqual(statuses('headGetPet'), statuses('getPet'))
  })

  it('names the scope each operation needs in its security requirement, as OpenAPI 3.1 allows for bearer schemes', () => {
    assert.deepEqual(operation('listPets').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('getPet').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('headListPets').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('headGetPet').security, [{ bearerAuth: ['pets:read'] }])
    assert.deepEqual(operation('createPet').security, [{ bearerAuth: ['pets:write'] }])
    assert.match(doc.components.securitySchemes.bearerAuth?.description ?? '', /pets:read.*pets:write.*403 `forbidden`/)
  })

  it("tells people the operations of each scope as the operations' security requirements name them, here and in keys create --help", () => {
    const operationsOfScope = new Map<string, string[]>()
    for (const { method, operation: op } of operationsOf(doc)) {
      if (method === 'head') continue
      for (const scope of op.security?.[0]?.bearerAuth ?? []) operationsOfScope.set(scope, [...(operationsOfScope.get(scope) ?? []), op.operationId ?? ''])
    }
    assert.deepEqual([...operationsOfScope.keys()].sort(), [...SCOPES].sort())
    for (const [scope, operations] of operationsOfScope) {
      assert.ok(doc.components.securitySchemes.bearerAuth?.description.includes(`\`${scope}\` (${operations.join(', ')})`), scope)
      assert.ok(KEYS_HELP['keys create'].includes(`${scope} (${operations.join(', ')})`), scope)
    }
  })

  it('documents limit as an integer from 1 to 100 defaulting to 20, and the status filter', () => {
    const parameters = operation('listPets').parameters ?? []
    const limit = parameters.find((p) => p.name === 'limit')
    assert.deepEqual(limit?.schema, { ...limit?.schema, type: 'integer', format: 'int32', minimum: 1, maximum: 100, default: 20 })
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
      'Vary',
      'X-Request-Id',
    ])
    for (const id of ['listPets', 'createPet']) {
      assert.deepEqual(Object.keys(operation(id).responses['429']?.headers ?? {}).sort(), [
        'Cache-Control',
        'RateLimit',
        'RateLimit-Policy',
        'Retry-After',
        'X-Request-Id',
      ])
    }
    // getPet's first hook sets the deprecation headers, so every answer of its route has them; a 400 or a
    // 503 may also come before its hooks (a request that is not plain HTTP/1.1, an overloaded server), and
    // the shared answers (405, 408, 417, 431) always do.
    for (const [status, response] of Object.entries(operation('getPet').responses)) {
      if (response.$ref !== undefined) continue
      for (const name of ['Deprecation', 'Sunset', 'Link']) {
        assert.ok(response.headers?.[name], `getPet ${status} lacks ${name}`)
        assert.equal(response.headers[name].required === true, !['400', '503'].includes(status), `getPet ${status} ${name}`)
      }
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

  it("declares HEAD where GET is served, as head<OperationId> with GET's parameters, statuses and headers, and no body", () => {
    for (const [id, headId] of [['listPets', 'headListPets'], ['getPet', 'headGetPet']] as const) {
      const get = operation(id)
      const head = operation(headId)
      assert.deepEqual(head.parameters, get.parameters, headId)
      assert.deepEqual(head.security, get.security, headId)
      for (const [status, response] of Object.entries(head.responses)) {
        const getResponse = get.responses[status]
        assert.ok(getResponse, `${headId} ${status}`)
        if (response.$ref !== undefined) {
          assert.equal(response.$ref, getResponse.$ref, `${headId} ${status}`)
          continue
        }
        assert.equal(response.content, undefined, `${headId} ${status} has a body`)
        assert.deepEqual(response.headers, getResponse.headers, `${headId} ${status}`)
      }
      assert.ok(get.responses['200']?.content, `${id} 200 lost its body`)
    }
  })

  it('bounds every string it describes, but the URLs under PUBLIC_BASE_URL, which the operator chooses', () => {
    const unbounded: string[] = []
    const walk = (node: unknown, at: string): void => {
      if (typeof node !== 'object' || node === null) return
      const schema = node as Record<string, unknown>
      const bounded = typeof schema.maxLength === 'number' || Array.isArray(schema.enum) || schema.const !== undefined
      if (schema.type === 'string' && !bounded) unbounded.push(at)
      for (const [key, value] of Object.entries(schema)) walk(value, `${at}/${key}`)
    }
    walk(doc, '#')
    assert.deepEqual(
      [...new Set(unbounded.map((at) => /\/headers\/([^/]+)\/schema$/.exec(at)?.[1] ?? at))].sort(),
      ['Link', 'Location'],
    )
  })

  it('gives the bounds the service keeps: Error.message, the request headers, and the ones a client sends', () => {
    const { Error: ErrorSchema, NewPet } = doc.components.schemas
    assert.deepEqual(ErrorSchema?.properties.message, { ...ErrorSchema?.properties.message, type: 'string', minLength: 1, maxLength: ERROR_MESSAGE_MAX_LENGTH })
    assert.equal(NewPet?.properties.name?.maxLength, 200)
    const parameter = (id: string, name: string) => (operation(id).parameters ?? []).find((p) => p.name === name)?.schema
    assert.equal(parameter('createPet', 'idempotency-key')?.maxLength, 255)
    assert.equal(parameter('listPets', 'cursor')?.maxLength, 64)
    assert.equal(parameter('listPets', 'if-none-match')?.maxLength, 16 * 1024)
    assert.equal(doc.components.headers?.['X-Request-Id']?.schema?.maxLength, 128)
  })

  it('gives every integer a format, int64 for ids and int32 for the rest, and Retry-After a maximum', () => {
    const integers = new Map<string, Record<string, unknown>[]>()
    const add = (name: string, schema: Record<string, unknown>) => integers.set(name, [...(integers.get(name) ?? []), schema])
    const walk = (node: unknown, at: string): void => {
      if (typeof node !== 'object' || node === null) return
      const schema = node as Record<string, unknown>
      if (schema.type === 'integer') add(at.replace(/^.*\/(properties|headers)\/|\/schema$/g, ''), schema)
      for (const [key, value] of Object.entries(schema)) walk(value, `${at}/${key}`)
    }
    walk(doc.components, '#')
    for (const { operation: op } of operationsOf(doc)) {
      for (const parameter of op.parameters ?? []) if (parameter.schema.type === 'integer') add(parameter.name, parameter.schema)
      walk(op.responses, '#')
    }
    const formats = Object.fromEntries([...integers].map(([name, schemas]) => [name, [...new Set(schemas.map((schema) => schema.format))]]))
    assert.deepEqual(formats, {
      'Retry-After': ['int32'],
      categoryId: ['int64'],
      id: ['int64'],
      limit: ['int32'],
      petId: ['int64'],
      status: ['int32'],
    })
    for (const schema of integers.get('Retry-After') ?? []) assert.deepEqual([schema.minimum, schema.maximum], [1, 60])
    assert.deepEqual(doc.components.schemas.Error?.properties.status, {
      ...doc.components.schemas.Error?.properties.status,
      minimum: Math.min(...Object.values(ERROR_STATUS)),
      maximum: Math.max(...Object.values(ERROR_STATUS)),
    })
  })

  it('keeps health and the document itself out of the document', () => {
    assert.doesNotMatch(JSON.stringify(Object.keys(doc.paths)), /healthz|readyz|openapi/)
  })

  it('matches the error catalogue table of the API guide', () => {
    const guide = fs.readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8')
    for (const code of ERROR_CODES) {
      assert.match(guide, new RegExp(`\\| \`${code}\` \\| ${ERROR_STATUS[code]} \\|`), `docs/api.md lacks ${code}`)
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
    // id, categoryId of Pet and NewPet, and petId of getPet and its HEAD.
    assert.equal(stdout.match(/"maximum": 9223372036854775807\b/g)?.length, 5)
    assert.doesNotMatch(stdout, /922337203685477[0-9]{4}(?<!5807)\b/)
  })
})

/**
 * What the storage does when the test says so: fail as a bug would, or as an outage does, or find
 * an `Idempotency-Key` held by a request still running, as the repository reports it once its wait
 * is over (PostgreSQL) or for a record an earlier release left (SQLite).
 */
interface Faults {
  fault: 'none' | 'bug' | 'outage' | 'key in use'
}

function outageError(engine: Engine): Error {
  return engine === 'sqlite'
    ? new Sqlite.SqliteError('database or disk is full', 'SQLITE_FULL')
    : Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
}

function faultyStorage(engine: Engine): { faults: Faults; wrap: (storage: Storage) => Storage } {
  const faults: Faults = { fault: 'none' }
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
      // The idempotency claim's holder, as the repository passes it on: the claim is generic to pets.
      createOnce: async (...args) =>
        faults.fault === 'key in use' ? { held: { state: 'in_progress' } as never } : storage.pets.createOnce(...args),
    },
    isUnavailable: (error) => storage.isUnavailable(error),
  })
  return { faults, wrap }
}

/** An answer as the wire gave it: through inject, or read off a socket. */
interface Answer {
  statusCode: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
}

/** Sends `bytes` on a new connection and reads the answer once the server closes it. */
function exchange(port: number, bytes: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes))
    let raw = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (raw += chunk))
    // A reset after the answer still leaves the answer to read: 'close' follows and decides.
    socket.on('error', () => {})
    socket.setTimeout(10_000, () => socket.destroy())
    socket.on('close', () => {
      const end = raw.indexOf('\r\n\r\n')
      if (end === -1) {
        reject(new Error(`no answer to ${JSON.stringify(bytes.slice(0, 80))}: ${JSON.stringify(raw)}`))
        return
      }
      const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n')
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
      resolve({ statusCode: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4) })
    })
  })
}

interface DocumentHeader {
  $ref?: string
  required?: boolean
  schema?: Record<string, unknown>
}

/** What is wrong with a header value for its documented schema, if anything; keywords the test cannot check fail it. */
function headerProblem(value: string, schema: Record<string, unknown>): string | undefined {
  const checked = new Set(['type', 'const', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'format'])
  const unchecked = Object.keys(schema).filter((keyword) => !checked.has(keyword))
  if (unchecked.length > 0) return `the test cannot check ${unchecked.join(', ')}`
  if (schema.type === 'integer') {
    if (!/^-?[0-9]+$/.test(value)) return 'not an integer'
    if (typeof schema.minimum === 'number' && Number(value) < schema.minimum) return `below ${schema.minimum}`
    if (typeof schema.maximum === 'number' && Number(value) > schema.maximum) return `above ${schema.maximum}`
    if (schema.format === 'int32' && Number(value) > 2 ** 31 - 1) return 'not an int32'
    return undefined
  }
  if (schema.type !== 'string') return `of type ${String(schema.type)}`
  if (schema.const !== undefined && value !== schema.const) return `not ${JSON.stringify(schema.const)}`
  if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern).test(value)) return `not matching ${schema.pattern}`
  if (typeof schema.minLength === 'number' && value.length < schema.minLength) return 'too short'
  if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) return 'too long'
  if (schema.format === 'uri' && !URL.canParse(value)) return 'not a URI'
  return undefined
}

/** Headers of the message rather than of the answer, which OpenAPI leaves out of a response's headers. */
const MESSAGE_HEADERS = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])

const RATE_LIMIT_PER_KEY = 10

/** Sent only while a per-key rate limit is configured (this suite configures one): never required. */
const CONFIGURED_HEADERS = new Set(['RateLimit', 'RateLimit-Policy'])

/** An operation's request, made afresh for each situation so that no answer comes from the read cache. */
interface Target {
  method: 'GET' | 'HEAD' | 'POST'
  url: string
  payload?: string
  /** The scope the operation does not need, for the 403. */
  otherScope: Scope
}

for (const engine of DIRECT_ENGINES) {
  describe(`OpenAPI document against the wire on ${engine}`, () => {
    let testApp: TestApp
    let overloadedApp: TestApp
    let port: number
    let doc: Document
    const { faults, wrap } = faultyStorage(engine)
    const valid = '{"name":"Wire","categoryId":1}'
    let pages = 0
    // Straight into the database: through the API, the key creating them would run out of requests.
    const newPetId = async () => (await testApp.storage.pets.create({ name: 'Wire', categoryId: 1n }, testApp.clock.now())).id
    const listPets = (): Target => ({ method: 'GET', url: `/v1/pets?limit=${(pages++ % 100) + 1}`, otherScope: 'pets:write' })
    const getPet = async (): Promise<Target> => ({ method: 'GET', url: `/v1/pets/${await newPetId()}`, otherScope: 'pets:write' })
    // In this order: by the time listPets' HEAD is sent, with limits of its own (a page the GET read may be
    // cached), getPet's situations have added pets enough for its pages to have a next one too.
    const targets: Record<string, () => Promise<Target>> = {
      listPets: async () => listPets(),
      createPet: async () => ({ method: 'POST', url: '/v1/pets', payload: valid, otherScope: 'pets:read' }),
      getPet,
      headGetPet: async () => ({ ...(await getPet()), method: 'HEAD' }),
      headListPets: async () => ({ ...listPets(), method: 'HEAD' }),
    }

    type Send = (target: Target, key: string) => Promise<Answer> | undefined
    const send = (target: Target, key: string, options: Partial<InjectOptions> = {}) =>
      testApp.request(key, {
        method: target.method,
        url: target.url,
        ...(target.payload === undefined ? {} : { payload: target.payload }),
        ...options,
        headers: { ...(target.payload === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
      })
    /** The request on a socket of its own, `lines` added to its head; unfinished, it waits for the headers timeout. */
    const raw = (target: Target, key: string, lines: string[], finished = true) => {
      const body = target.payload ?? ''
      const head = [`${target.method} ${target.url} HTTP/1.1`, 'Host: a', `Authorization: Bearer ${key}`, 'Connection: close', ...lines]
      if (target.payload !== undefined) head.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`)
      return exchange(port, finished ? `${head.join('\r\n')}\r\n\r\n${body}` : `${head.join('\r\n')}\r\n`)
    }
    const lastPage = (target: Target): Target => ({ ...target, url: target.url.replace(/limit=[0-9]+/, 'limit=100') })
    const revalidated = async (target: Target, key: string) => {
      const { etag } = (await send(target, key)).headers
      return send(target, key, etag === undefined ? {} : { headers: { 'if-none-match': etag } })
    }
    const withFault = (fault: Faults['fault']): Send => async (target, key) => {
      faults.fault = fault
      try {
        return await send(target, key)
      } finally {
        faults.fault = 'none'
      }
    }
    const keyed = (idempotencyKey: string, target: Target, key: string, payload?: string) =>
      send(target, key, { headers: { 'idempotency-key': idempotencyKey }, ...(payload === undefined ? {} : { payload }) })

    /**
     * Every way a request to an operation can go, each applied to every operation it can apply to
     * (undefined: it cannot). Together they must give every status the document lists, and only those.
     */
    const situations: Record<string, Send> = {
      'as the document says': (target, key) => send(target, key),
      'again, with the ETag of its answer': (target, key) => revalidated(target, key),
      // Fewer than 100 pets: the listing is one page, without a next one.
      'on a last page': (target, key) => send(lastPage(target), key),
      'again, with the ETag of its answer, on a last page': (target, key) => revalidated(lastPage(target), key),
      'without a key': (target) => testApp.app.inject({ method: target.method, url: target.url }),
      'with a key that is not valid': (target) => send(target, 'ps_live_not_a_key'),
      'with a key without the scope': async (target) => send(target, await testApp.createKey({ scopes: [target.otherScope] })),
      'with a query parameter it does not take': (target, key) => send(target, key, { url: `${target.url}${target.url.includes('?') ? '&' : '?'}unknown=1` }),
      'with a Host header twice': (target, key) => raw(target, key, ['Host: b']),
      'over the rate limit': async (target, key) => {
        for (let i = 0; i < RATE_LIMIT_PER_KEY; i++) await send(target, key)
        return send(target, key)
      },
      'with a body over 16 KiB': (target, key) => send(target, key, { payload: valid + ' '.repeat(16 * 1024), headers: { 'content-type': 'application/json' } }),
      'with a body that is not JSON': (target, key) => send(target, key, { payload: valid, headers: { 'content-type': 'text/plain' } }),
      'with a body in a Content-Encoding': (target, key) => send(target, key, { payload: valid, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }),
      'with an Expect other than 100-continue': (target, key) => raw(target, key, ['Expect: something-else']),
      'with a header block over 16 KiB': (target, key) => raw(target, key, [`X-Big: ${'x'.repeat(20_000)}`]),
      [`with more than ${MAX_HEADER_LINES} header lines`]: (target, key) =>
        raw(target, key, Array.from({ length: MAX_HEADER_LINES }, (_, i) => `X-Line-${i}: ${i}`)),
      'whose headers never end': (target, key) => raw(target, key, [], false),
      'with a method its path lacks': (target, key) => testApp.request(key, { method: 'DELETE', url: target.url }),
      'while the storage has a bug': withFault('bug'),
      'while the database is down': withFault('outage'),
      'while the server is overloaded': async (target) => {
        const key = await overloadedApp.createKey()
        return overloadedApp.request(key, { method: target.method, url: target.url, payload: target.payload, headers: { 'content-type': 'application/json' } })
      },
      'with the Idempotency-Key of a request still running': async (target, key) => {
        faults.fault = 'key in use'
        try {
          return await keyed('running', target, key)
        } finally {
          faults.fault = 'none'
        }
      },
      'with the Idempotency-Key of another body': async (target, key) => {
        await keyed('reused', target, key)
        return keyed('reused', target, key, '{"name":"Other","categoryId":1}')
      },
      'with the Idempotency-Key of the same request, again': async (target, key) => {
        await keyed('again', target, key)
        return keyed('again', target, key)
      },
      'for a pet that does not exist': (target, key) => (target.url.startsWith('/v1/pets/') ? send(target, key, { url: '/v1/pets/999999' }) : undefined),
      'with a petId that is not an integer': (target, key) => (target.url.startsWith('/v1/pets/') ? send(target, key, { url: '/v1/pets/abc' }) : undefined),
      'after the sunset': async (target, key) => {
        const now = testApp.clock.ms
        testApp.clock.ms = GET_PET_SUNSET.getTime()
        try {
          return await send(target, key)
        } finally {
          testApp.clock.ms = now
        }
      },
    }

    /** What each operation answered in each situation. */
    const answers: { operationId: string; situation: string; answer: Answer }[] = []
    before(async () => {
      const timeouts = { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000' }
      testApp = await buildTestApp(engine, { env: { RATE_LIMIT_PER_KEY: String(RATE_LIMIT_PER_KEY), ...timeouts }, storage: wrap })
      await testApp.app.listen({ port: 0, host: '127.0.0.1' })
      port = (testApp.app.server.address() as net.AddressInfo).port
      overloadedApp = await buildTestApp(engine, { env: { OVERLOAD_MAX_HEAP_MB: '1' } })
      doc = (await servedDocument(testApp)).doc
      // More pets than the first pages hold, so that some listing has a next page.
      for (let i = 0; i < 3; i++) await newPetId()
      // Nothing is shed until the first samples after the app was ready (load-shedding.ts).
      const probe = await overloadedApp.createKey()
      for (let tries = 0; (await overloadedApp.request(probe, { method: 'GET', url: '/v1/pets' })).statusCode !== 503; tries++) {
        assert.ok(tries < 100, 'the app with OVERLOAD_MAX_HEAP_MB=1 never shed a request')
        await sleep(100)
      }
      for (const [operationId, target] of Object.entries(targets)) {
        for (const [situation, sendIn] of Object.entries(situations)) {
          const answer = await sendIn(await target(), await testApp.createKey())
          if (answer !== undefined) answers.push({ operationId, situation, answer })
        }
      }
    })
    after(async () => {
      await overloadedApp.close()
      await testApp.close()
    })

    const documentedResponse = (operationId: string, status: number): Response | undefined => {
      const op = operationsOf(doc).find(({ operation: candidate }) => candidate.operationId === operationId)?.operation
      const response = op?.responses[String(status)]
      return response === undefined ? undefined : resolved(doc, response)
    }
    /** A response's headers with references to components.headers resolved, by lower-case name. */
    const documentedHeaders = (response: Response): Map<string, { name: string; header: DocumentHeader }> =>
      new Map(
        Object.entries((response.headers ?? {}) as Record<string, DocumentHeader>).map(([name, header]) => {
          const target = header.$ref === undefined ? header : (doc.components.headers?.[header.$ref.replace('#/components/headers/', '')] ?? header)
          return [name.toLowerCase(), { name, header: target }]
        }),
      )

    it('answers every situation with a status its operation documents', () => {
      const undocumented = answers
        .filter(({ operationId, answer }) => documentedResponse(operationId, answer.statusCode) === undefined)
        .map(({ operationId, situation, answer }) => `${operationId} ${situation}: ${answer.statusCode} ${answer.body}`)
      assert.deepEqual(undocumented, [])
    })

    it('gives every status each operation documents in some situation', () => {
      const neverGiven = operationsOf(doc).flatMap(({ operation: op }) =>
        Object.keys(op.responses)
          .filter((status) => !answers.some(({ operationId, answer }) => operationId === op.operationId && String(answer.statusCode) === status))
          .map((status) => `${op.operationId} ${status}`),
      )
      assert.deepEqual(neverGiven, [])
    })

    it('sends every header the document marks required, on every answer of its response', () => {
      const missing: string[] = []
      for (const { operationId, situation, answer } of answers) {
        const response = documentedResponse(operationId, answer.statusCode)
        if (response === undefined) continue
        for (const [lowerName, { name, header }] of documentedHeaders(response)) {
          if (header.required === true && answer.headers[lowerName] === undefined) missing.push(`${operationId} ${answer.statusCode} ${situation}: no ${name}`)
        }
      }
      assert.deepEqual(missing, [])
    })

    it('marks required each documented header that every answer of its response carried, but those a setting turns off', () => {
      const unmarked: string[] = []
      for (const { operation: op } of operationsOf(doc)) {
        for (const [status, documentedResponseOf] of Object.entries(op.responses)) {
          const given = answers.filter(({ operationId, answer }) => operationId === op.operationId && String(answer.statusCode) === status)
          for (const [lowerName, { name, header }] of documentedHeaders(resolved(doc, documentedResponseOf))) {
            if (header.required === true || CONFIGURED_HEADERS.has(name) || given.length === 0) continue
            if (given.every(({ answer }) => answer.headers[lowerName] !== undefined)) unmarked.push(`${op.operationId} ${status} ${name}`)
          }
        }
      }
      assert.deepEqual(unmarked, [])
    })

    it('sends each documented header as its schema says, and no header the response does not document', () => {
      const disagreements: string[] = []
      for (const { operationId, situation, answer } of answers) {
        const response = documentedResponse(operationId, answer.statusCode)
        if (response === undefined) continue
        const documented = documentedHeaders(response)
        for (const [lowerName, value] of Object.entries(answer.headers)) {
          if (value === undefined || MESSAGE_HEADERS.has(lowerName)) continue
          const header = documented.get(lowerName)?.header
          const problem = header === undefined ? 'sent but not documented' : headerProblem(String(value), header.schema ?? {})
          if (problem !== undefined) disagreements.push(`${operationId} ${answer.statusCode} ${situation}: ${lowerName}: ${String(value)}: ${problem}`)
        }
      }
      assert.deepEqual(disagreements, [])
    })

    it('sends every header each response documents on at least one of its answers', () => {
      const neverSent: string[] = []
      for (const { operation: op } of operationsOf(doc)) {
        for (const [status, documentedResponseOf] of Object.entries(op.responses)) {
          const given = answers.filter(({ operationId, answer }) => operationId === op.operationId && String(answer.statusCode) === status)
          for (const [lowerName, { name }] of documentedHeaders(resolved(doc, documentedResponseOf))) {
            if (!given.some(({ answer }) => answer.headers[lowerName] !== undefined)) neverSent.push(`${op.operationId} ${status} ${name}`)
          }
        }
      }
      assert.deepEqual(neverSent, [])
    })

    it("writes no error message longer than Error.message's maxLength, whatever part of the request it quotes", async () => {
      const maxLength = doc.components.schemas.Error?.properties.message?.maxLength
      assert.equal(typeof maxLength, 'number')
      const key = await testApp.createKey()
      // Each fills the header block or the body with what the message quotes, just short of its limit.
      const long = (length: number) => 'x'.repeat(length)
      const quoting = [
        exchange(port, `GET /v1/${long(16_200)} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`),
        exchange(port, `GET /v1/pets?${Array.from({ length: 6 }, (_, i) => `${i}${long(2_600)}=1`).join('&')} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`),
        send({ method: 'POST', url: '/v1/pets', otherScope: 'pets:read' }, key, {
          payload: JSON.stringify({ name: 'Wire', categoryId: 1, ...Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`${i}${long(2_650)}`, 1])) }),
          headers: { 'content-type': 'application/json' },
        }),
      ]
      const messages = (await Promise.all(quoting)).map((answer) => (JSON.parse(answer.body) as { message: string }).message)
      for (const message of messages) assert.ok(message.length > 13_000, `not quoting the request: ${message.slice(0, 80)}`)
      for (const { answer } of answers) {
        if (answer.body !== '') messages.push((JSON.parse(answer.body) as { message?: string }).message ?? '')
      }
      assert.deepEqual(messages.filter((message) => [...message].length > Number(maxLength)), [])
    })

    it("refuses an If-None-Match longer than its maxLength with 431: the header block can't hold it", async () => {
      const maxLength = (operationsOf(doc).find(({ operation: op }) => op.operationId === 'listPets')?.operation.parameters ?? []).find(
        (p) => p.name === 'if-none-match',
      )?.schema.maxLength
      const answer = await raw(listPets(), await testApp.createKey(), [`If-None-Match: "${'x'.repeat(Number(maxLength) - 1)}"`])
      assert.equal(answer.statusCode, 431)
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
      const id = await newPetId()
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
