import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { main } from '../src/cli.js'
import { ERROR_CODES, ERROR_STATUS } from '../src/errors.js'
import { parseJson } from '../src/http/json-body.js'
import { ROOT, buildTestApp, type TestApp } from './helper.js'

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
    securitySchemes: Record<string, { type: string; scheme: string }>
    schemas: Record<string, { properties: Record<string, Record<string, unknown>>; required: string[] }>
    responses: Record<string, Response>
  }
}

/** The document as a client's JSON parser sees it: the whole of it, as the service serves it. */
async function servedDocument(t: TestApp): Promise<{ text: string; doc: Document }> {
  const response = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })
  assert.equal(response.statusCode, 200)
  return { text: response.body, doc: JSON.parse(response.body) as Document }
}

describe('OpenAPI document', () => {
  let t: TestApp
  let doc: Document
  before(async () => {
    t = await buildTestApp('sqlite', {
      env: { PRODUCTION_BASE_URL: 'https://api.example.org', STAGING_BASE_URL: 'https://staging.example.org/' },
    })
    doc = (await servedDocument(t)).doc
  })
  after(() => t.close())

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
    assert.deepEqual(statuses('listPets'), ['200', '304', '400', '401', '429', '500', '503'])
    assert.deepEqual(statuses('createPet'), ['201', '400', '401', '409', '413', '415', '422', '429', '500', '503'])
    assert.deepEqual(statuses('getPet'), ['200', '304', '400', '401', '404', '410', '429', '500', '503'])
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
    for (const id of ['listPets', 'createPet', 'getPet']) {
      assert.deepEqual(Object.keys(operation(id).responses['429']?.headers ?? {}).sort(), ['RateLimit', 'RateLimit-Policy', 'Retry-After'])
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
  let t: TestApp
  before(async () => {
    t = await buildTestApp('sqlite')
  })
  after(() => t.close())

  const INT64_MAX = 9223372036854775807n

  /** The bounds as written, read without rounding (JSON.parse would read 9223372036854775808). */
  const boundsOf = (schema: unknown) => {
    const { minimum, maximum } = schema as { minimum?: unknown; maximum?: unknown }
    return { minimum, maximum }
  }

  it('bounds id, categoryId and petId from 1 to 9223372036854775807, every digit written', async () => {
    const { text } = await servedDocument(t)
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
