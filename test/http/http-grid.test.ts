import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js'
import { http } from '../../src/http/node-http.js'
import { DIRECT_ENGINES, ROOT, type TestApp, buildTestApp, postPet } from '../helper.js'

// Every method, unknown tokens included, × every path the API port serves × If-None-Match × a key or
// none, sent over a real socket (HEAD, CONNECT and unknown methods are Node's parser's business before
// they are Fastify's), each answer held against what the API guide and the OpenAPI document say of it.
// Bugs hid where two features meet (a HEAD that revalidates answered 500): this writes the meetings down.

/** Methods Node's parser knows are routed (405 where a path lacks them); the others never reach routing. */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'FOO', 'BREW', 'get', 'post'] as const
type Method = (typeof METHODS)[number]

const CONDITIONS = ['no If-None-Match', 'a matching If-None-Match', 'If-None-Match: *', 'a stale If-None-Match'] as const
type Condition = (typeof CONDITIONS)[number]

const KEYED = [true, false] as const

/** A pet body every method that may carry one sends: valid, so that what decides the answer is the method. */
const PET_BODY = '{"name":"Grid","categoryId":1}'

interface Answer {
  status: number
  /** Lower-case names. */
  headers: Record<string, string>
  body: string
}

/** What a HEAD, a 304 and a 1xx/204 carry no body of (RFC 9112 §6.3); anything else is framed by its headers. */
function hasBody(method: string, status: number): boolean {
  return method !== 'HEAD' && status !== 304 && status !== 204 && status >= 200
}

/** The first response in `raw`, or undefined while it is incomplete; `closed`: the server has hung up. */
function parseAnswer(raw: Buffer, method: string, closed: boolean): Answer | undefined {
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const name = line.slice(0, line.indexOf(':')).toLowerCase()
    assert.ok(!(name in headers), `${name} sent twice`)
    headers[name] = line.slice(line.indexOf(':') + 1).trim()
  }
  const status = Number(statusLine.split(' ')[1])
  const rest = raw.subarray(end + 4)
  if (!hasBody(method, status)) return { status, headers, body: rest.toString('utf8') }
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length'])
    return rest.length < length ? undefined : { status, headers, body: rest.subarray(0, length).toString('utf8') }
  }
  if (headers['transfer-encoding'] === 'chunked') {
    const text = rest.toString('latin1')
    if (!text.endsWith('0\r\n\r\n')) return undefined
    const chunks: Buffer[] = []
    let at = 0
    for (;;) {
      const lineEnd = text.indexOf('\r\n', at)
      const size = Number.parseInt(text.slice(at, lineEnd), 16)
      if (size === 0) break
      chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size))
      at = lineEnd + 2 + size + 2
    }
    return { status, headers, body: Buffer.concat(chunks).toString('utf8') }
  }
  return closed ? { status, headers, body: rest.toString('utf8') } : undefined
}

/**
 * Sends one request on a new connection and resolves with its answer, plus whether the server closed
 * the connection by itself. Bytes after a bodiless answer would be a body HEAD or 304 must not have: the
 * connection is watched a moment longer for them.
 */
function send(port: number, request: string, method: string): Promise<Answer & { closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request))
    let raw = Buffer.alloc(0)
    let answer: Answer | undefined
    let settled = false
    const finish = (closedByServer: boolean) => {
      if (settled) return
      settled = true
      socket.destroy()
      const parsed = answer ?? parseAnswer(raw, method, true)
      if (parsed === undefined) reject(new Error(`no whole answer to ${JSON.stringify(request.split('\r\n')[0])}: ${JSON.stringify(raw.toString('latin1'))}`))
      else resolve({ ...parsed, closedByServer })
    }
    socket.on('data', (chunk: Buffer) => {
      raw = Buffer.concat([raw, chunk])
      const wasIncomplete = answer === undefined
      answer = parseAnswer(raw, method, false)
      if (answer === undefined || !wasIncomplete) return
      // An answer that closes the connection is awaited until it has, to see that it does.
      if (answer.headers.connection === 'close') return
      if (hasBody(method, answer.status)) finish(false)
      // A bodiless answer is complete at its blank line; anything that follows it would be a body.
      else setTimeout(() => finish(false), 20)
    })
    socket.on('end', () => finish(true))
    socket.on('error', (error) => (settled ? undefined : reject(error)))
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${JSON.stringify(request.split('\r\n')[0])}`)))
  })
}

interface DocumentHeader {
  required?: boolean
}
interface DocumentResponse {
  $ref?: string
  headers?: Record<string, DocumentHeader>
}
interface OpenApiDocument {
  servers: { url: string }[]
  paths: Record<string, Record<string, { operationId: string; security?: unknown[]; responses: Record<string, DocumentResponse> }>>
  components: { responses?: Record<string, DocumentResponse>; schemas: { Error: { properties: { code: { enum: string[] } } } } }
}

/**
 * A path the grid sends requests to, and what the API guide and the OpenAPI document say of it:
 * the methods it serves, and for an operation of the document, the operation by method.
 */
interface GridPath {
  /** As sent. */
  url: string
  /** Its path in the document (`/pets/{petId}`), or undefined for paths the API guide alone describes. */
  documentPath?: string
  /** The methods it serves, HEAD included wherever GET is; empty for a path nothing serves. */
  allow: string[]
  /** What its GET answers with a valid key and no condition. */
  found: boolean
}

/** The paths of the API guide's "Around the API" table, each with its method. */
function guideAroundTheApi(): { method: string; path: string }[] {
  const guide = fs.readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8')
  const section = guide.slice(guide.indexOf('## Around the API'), guide.indexOf('\n## ', guide.indexOf('## Around the API') + 1))
  return [...section.matchAll(/^\| `([A-Z]+) (\/[^`\s]*)` \|/gm)].map(([, method = '', route = '']) => ({ method, path: route }))
}

/** `GET` comes with `HEAD` (docs/api.md: "Both GET operations answer HEAD too"; Fastify serves every GET so). */
const withHead = (methods: string[]) => methods.flatMap((method) => (method === 'GET' ? ['GET', 'HEAD'] : [method]))

/** The combination a test title and a failure name. */
const what = (method: string, url: string, condition: Condition, keyed: boolean) =>
  `${method} ${url} with ${condition}, ${keyed ? 'with' : 'without'} a key`

/** Headers that differ between any two answers, whatever the method. */
const PER_ANSWER = new Set(['date', 'x-request-id', 'ratelimit'])

/**
 * Headers whose presence the document must account for: on the wire only where the response that
 * carries them declares them. (X-Request-Id, Cache-Control and the framing headers go on every answer.)
 */
const DECLARED = ['ratelimit', 'ratelimit-policy', 'retry-after', 'www-authenticate', 'allow', 'deprecation', 'sunset', 'etag', 'link', 'location', 'idempotent-replayed']

const combinations = (paths: number) => METHODS.length * paths * CONDITIONS.length * KEYED.length

for (const engine of DIRECT_ENGINES) {
  describe(`the HTTP grid on ${engine}`, () => {
    let testApp: TestApp
    let port: number
    let key: string
    let doc: OpenApiDocument
    let paths: GridPath[]
    /** The document's paths are under its server's path (`/v1`). */
    let basePath: string
    let count = 0

    before(async () => {
      // Limits high enough that the grid's own requests never meet them: 429 is not what it asks about.
      testApp = await buildTestApp(engine, { env: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '1000000' } })
      key = await testApp.createKey()
      await testApp.app.listen({ port: 0, host: '127.0.0.1' })
      port = (testApp.app.server.address() as net.AddressInfo).port
      const created = await postPet(testApp, key, PET_BODY)
      assert.equal(created.statusCode, 201)
      const petId = (JSON.parse(created.body) as { id: number }).id
      doc = JSON.parse((await testApp.app.inject({ method: 'GET', url: '/v1/openapi.json' })).body) as OpenApiDocument
      basePath = new URL(doc.servers[0]?.url ?? '').pathname.replace(/\/$/, '')

      const operations = Object.entries(doc.paths).flatMap(([documentPath, byMethod]) => {
        // The document declares HEAD wherever GET is served.
        const allow = Object.keys(byMethod).map((method) => method.toUpperCase())
        if (!documentPath.includes('{')) return [{ url: basePath + documentPath, documentPath, allow, found: true }]
        // A path with a parameter: one that names a pet, and one that names none.
        return [String(petId), '999999'].map((id) => ({ url: basePath + documentPath.replace(/\{[^}]+\}/, id), documentPath, allow, found: id !== '999999' }))
      })
      const around = guideAroundTheApi()
      assert.ok(around.length >= 4, `the API guide's "Around the API" table lists ${around.length} paths`)
      const aroundPaths = [...new Set(around.map(({ path: route }) => route))].map((route) => ({
        url: route,
        allow: withHead(around.filter((entry) => entry.path === route).map(({ method }) => method)),
        found: true,
      }))
      paths = [...operations, ...aroundPaths, { url: `${basePath}/nothing-here`, allow: [], found: false }]
    })
    after(() => testApp.close())

    /** The ETag a GET of `url` with the key has now, or a tag no answer has when it has none. */
    async function currentETag(url: string): Promise<string> {
      const answer = await send(port, `GET ${url} HTTP/1.1\r\nHost: grid\r\nAuthorization: Bearer ${key}\r\n\r\n`, 'GET')
      return answer.headers.etag ?? '"no-etag-here"'
    }

    async function request(method: Method, url: string, condition: Condition, keyed: boolean): Promise<Answer & { closedByServer: boolean }> {
      const lines = [`${method} ${url} HTTP/1.1`, 'Host: grid']
      if (keyed) lines.push(`Authorization: Bearer ${key}`)
      const ifNoneMatch = {
        'no If-None-Match': undefined,
        'a matching If-None-Match': await currentETag(url),
        'If-None-Match: *': '*',
        'a stale If-None-Match': '"stale-etag"',
      }[condition]
      if (ifNoneMatch !== undefined) lines.push(`If-None-Match: ${ifNoneMatch}`)
      const body = ['POST', 'PUT', 'PATCH'].includes(method) ? PET_BODY : ''
      if (body !== '') lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`)
      count++
      return send(port, `${lines.join('\r\n')}\r\n\r\n${body}`, method)
    }

    /**
     * The status the API guide and the document promise for one combination, and the error code when it
     * is an error. In the order the service decides: the parser, CONNECT, routing, authentication, the
     * operation.
     */
    function expected(method: Method, target: GridPath, condition: Condition, keyed: boolean): { status: number; code?: ErrorCode; allow?: string } {
      // docs/api.md, "The HTTP it speaks": a method Node's parser does not know is 501 on any path.
      if (!http.METHODS.includes(method)) return { status: 501, code: 'not_implemented' }
      // docs/api.md: CONNECT is 405 with an empty Allow, whatever the target: this is not a proxy.
      if (method === 'CONNECT') return { status: 405, code: 'method_not_allowed', allow: '' }
      if (target.allow.length === 0) return { status: 404, code: 'not_found' }
      // docs/api.md: any method a known path does not have is 405 with Allow, before authentication.
      if (!target.allow.includes(method)) return { status: 405, code: 'method_not_allowed', allow: target.allow.join(', ') }
      const operation = target.documentPath === undefined ? undefined : doc.paths[target.documentPath]?.[method.toLowerCase()]
      // The document: every operation needs a key (bearerAuth), refused with 401 before anything else.
      if (operation !== undefined && (operation.security ?? [{}]).length > 0 && !keyed) return { status: 401, code: 'unauthorized' }
      if (!target.found) return { status: 404, code: 'not_found' }
      if (method === 'POST') return { status: 201 }
      // docs/api.md, "Conditional requests": listPets and getPet answer a matching If-None-Match (or *) with
      // 304. The paths around the API carry no ETag and read If-None-Match as nothing.
      const conditional = operation !== undefined && (condition === 'a matching If-None-Match' || condition === 'If-None-Match: *')
      return { status: conditional ? 304 : 200 }
    }

    /** The response the document declares for this answer, or undefined where the document says nothing of the path. */
    function declared(target: GridPath, method: Method, status: number): DocumentResponse | undefined {
      if (target.documentPath === undefined) return undefined
      const operations = doc.paths[target.documentPath] ?? {}
      const routed = operations[method.toLowerCase()]
      // A 405 belongs to no operation of the path: each of them lists it.
      const candidates = routed !== undefined ? [routed] : Object.values(operations)
      const response = candidates.map((operation) => operation.responses[String(status)]).find((found) => found !== undefined)
      assert.ok(response !== undefined, `the document declares no ${status} for ${method} ${target.documentPath}`)
      if (response.$ref === undefined) return response
      const name = response.$ref.replace('#/components/responses/', '')
      const shared = doc.components.responses?.[name]
      assert.ok(shared !== undefined, `the document's ${response.$ref} is missing`)
      return shared
    }

    function check(method: Method, target: GridPath, condition: Condition, keyed: boolean, answer: Answer & { closedByServer: boolean }): void {
      const name = what(method, target.url, condition, keyed)
      const want = expected(method, target, condition, keyed)
      assert.equal(answer.status, want.status, `${name}: ${answer.status} ${answer.body}`)
      assert.ok(answer.status < 500 || answer.status === 501, `${name}: a 5xx`)
      assert.match(answer.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/, `${name}: no X-Request-Id`)
      if (!hasBody(method, answer.status)) assert.equal(answer.body, '', `${name}: a body where none may be`)

      if (answer.status >= 400) {
        assert.equal(answer.headers['cache-control'], 'no-store', `${name}: an error must not be cached`)
        assert.match(answer.headers['content-type'] ?? '', /^application\/json/, name)
        if (method !== 'HEAD') {
          const body = JSON.parse(answer.body) as Record<string, unknown>
          assert.deepEqual(Object.keys(body), ['code', 'message', 'status'], `${name}: ${answer.body}`)
          assert.equal(body.status, answer.status, name)
          assert.equal(body.code, want.code, name)
          assert.equal(ERROR_STATUS[body.code as ErrorCode], answer.status, `${name}: ${String(body.code)} is not catalogued as ${answer.status}`)
          assert.ok(typeof body.message === 'string' && body.message !== '', name)
        }
      }
      if (want.allow !== undefined) assert.equal(answer.headers.allow, want.allow, `${name}: Allow`)
      if (answer.status === 401) assert.match(answer.headers['www-authenticate'] ?? '', /^Bearer realm="petstore"/, name)
      if (answer.status === 304) {
        assert.match(answer.headers.etag ?? '', /^"/, `${name}: a 304 without its ETag`)
        assert.equal(answer.headers['content-type'], undefined, name)
      }
      if (answer.status === 200 || answer.status === 304) {
        if (target.documentPath !== undefined) assert.equal(answer.headers['cache-control'], 'private, no-cache', name)
      }
      if (answer.status === 201) assert.match(answer.headers.location ?? '', new RegExp(`${basePath}/pets/[0-9]+$`), name)
      // docs/api.md: getPet's every answer carries the deprecation, those given before routing excepted.
      if (target.documentPath?.includes('{') === true && target.allow.includes(method)) {
        for (const header of ['deprecation', 'sunset', 'link']) assert.ok(answer.headers[header] !== undefined, `${name}: no ${header}`)
        assert.equal(answer.headers.link, `<${testApp.config.publicBaseUrl}${basePath}/pets>; rel="successor-version"`, name)
      }
      // docs/api.md: the connection is closed after an answer to a method the parser refused.
      if (want.status === 501) assert.ok(answer.closedByServer, `${name}: the connection stayed open`)

      // 501 is answered before there is a request to route, on any path: the document lists its code
      // in Error.code, under no operation, since an unknown method is no operation's method.
      if (want.status === 501) return
      const response = declared(target, method, answer.status)
      if (response === undefined) return
      const documented = new Map(Object.entries(response.headers ?? {}).map(([header, value]) => [header.toLowerCase(), value]))
      for (const [header, value] of documented) {
        if (value.required === true) assert.ok(answer.headers[header] !== undefined, `${name}: the document says ${header} is always sent`)
      }
      for (const header of DECLARED) {
        if (answer.headers[header] !== undefined) assert.ok(documented.has(header), `${name}: ${header} is sent but not declared for ${answer.status}`)
      }
    }

    it(`lists every path: the document's operations, a missing pet, the API guide's paths around the API, and one nothing serves`, () => {
      assert.deepEqual(
        paths.map(({ url }) => url.replace(/\/pets\/[0-9]+$/, '/pets/{id}')),
        ['/v1/pets', '/v1/pets/{id}', '/v1/pets/{id}', '/v1/openapi.json', '/docs', '/healthz', '/readyz', '/v1/nothing-here'],
      )
      assert.ok(doc.components.schemas.Error.properties.code.enum.includes('not_implemented'), 'the document lists not_implemented')
    })

    for (const method of METHODS) {
      it(`answers ${method} on every path as the API guide and the OpenAPI document say, under each If-None-Match, with a key and without`, async () => {
        for (const target of paths) {
          for (const condition of CONDITIONS) {
            for (const keyed of KEYED) {
              const answer = await request(method, target.url, condition, keyed)
              check(method, target, condition, keyed, answer)
              if (method !== 'HEAD') continue
              // HEAD is GET without the body: the same status, and the same headers but those of the moment.
              const get = await request('GET', target.url, condition, keyed)
              count--
              const comparable = (headers: Record<string, string>) => Object.entries(headers).filter(([header]) => !PER_ANSWER.has(header))
              assert.equal(answer.status, get.status, what(method, target.url, condition, keyed))
              assert.deepEqual(comparable(answer.headers), comparable(get.headers), what(method, target.url, condition, keyed))
            }
          }
        }
      })
    }

    it(`ran ${combinations(8)} combinations: ${METHODS.length} methods × 8 paths × ${CONDITIONS.length} If-None-Match × with and without a key`, () => {
      assert.equal(count, combinations(paths.length))
    })
  })
}
