import assert from 'node:assert/strict'
import { randomInt } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { createKey } from '../../scripts/petstore-process.js'
import { containsKey, redactKeys } from '../../src/shared/redaction.js'
import { DIRECT_ENGINES, type TestDatabase, createTestDatabase } from '../helper.js'
import { type ServerProcess, cleanupProcesses, freePort, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

// A key put where it does not belong, in whatever encoding, must come back nowhere: not in the answer
// (status line, headers, body), not in any log line, span or metric. The grid is every place a request
// can carry text × every encoding a key can arrive in × two keys (one the service issued, one it never
// did), sent on the wire to a real `petstore serve` with tracing and metrics on, per engine.

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const PREFIX_LENGTH = 'ps_live_'.length

const hex = (char: string) => char.charCodeAt(0).toString(16).padStart(2, '0')
const percent = (char: string, upper = true) => `%${upper ? hex(char).toUpperCase() : hex(char)}`
const at = (key: string, index: number, form: (char: string) => string) => key.slice(0, index) + form(key[index] ?? '') + key.slice(index + 1)

/** Every encoding a key can arrive in, by name: each is the key to a reader who undoes it. */
const ENCODINGS: Record<string, (key: string) => string> = {
  raw: (key) => key,
  'every byte, upper-case hex': (key) => [...key].map((char) => percent(char)).join(''),
  'every byte, lower-case hex': (key) => [...key].map((char) => percent(char, false)).join(''),
  'every byte, mixed-case hex': (key) => [...key].map((char, i) => `%${hex(char)[0]}${i % 2 === 0 ? hex(char)[1]?.toUpperCase() : hex(char)[1]}`).join(''),
  'the first character': (key) => at(key, 0, percent),
  "the secret's first character": (key) => at(key, PREFIX_LENGTH, percent),
  'one character in the middle of the secret': (key) => at(key, PREFIX_LENGTH + 15, (char) => percent(char, false)),
  'the underscores only': (key) => key.replaceAll('_', '%5F'),
  'the first character encoded twice': (key) => at(key, 0, (char) => `%25${hex(char)}`),
  'every byte encoded twice': (key) => [...key].map((char) => `%25${hex(char)}`).join(''),
}

/**
 * Keys side by side, as a client that pastes twice, or into the middle of a key, sends them: `a` and `b`
 * are two keys of one environment, and the encoding applies to the whole. Every key in them counts, not
 * only the first.
 */
const ARRANGEMENTS: Record<string, (a: string, b: string) => string> = {
  'the key twice in a row': (a) => a + a,
  'two keys touching': (a, b) => a + b,
  'three keys in a row': (a, b) => a + b + a,
  'a key cut short, then another': (a, b) => a.slice(0, PREFIX_LENGTH + 12) + b,
  'overlapping: the second key begins on the last two characters of the first': (a, b) => a.slice(0, -2) + b,
  'a key pasted into the middle of another': (a, b) => a.slice(0, PREFIX_LENGTH + 16) + b + a.slice(PREFIX_LENGTH + 16),
  'a key after a bare prefix': (a) => a.slice(0, PREFIX_LENGTH) + a,
}

/** Within a JSON string, escapes that JSON.parse undoes. */
const JSON_ENCODINGS: Record<string, (key: string) => string> = {
  'JSON \\u escapes, every character': (key) => [...key].map((char) => `\\u00${hex(char)}`).join(''),
  'a JSON \\u escape, the first character': (key) => at(key, 0, (char) => `\\u00${hex(char).toUpperCase()}`),
}

interface Sent {
  method?: string
  path?: string
  /** Replaces the default header of the same name (any case); null drops it. */
  headers?: Record<string, string | null>
  body?: string
  /** The metrics listener instead of the API. */
  metrics?: boolean
}

interface Placement {
  name: string
  request: (text: string) => Sent
  /** A JSON body's string: the JSON escapes apply too. */
  json?: boolean
  /** Where the service would keep the text: a key there is refused with 400, in any encoding. */
  stored?: boolean
}

const post = (headers: Record<string, string | null>, body = '{"name":"Rex","categoryId":1}'): Sent => ({
  method: 'POST',
  path: '/v1/pets',
  headers: { 'content-type': 'application/json', ...headers },
  body,
})

/** Every place a request can carry a key; `petId()` names a pet that exists. */
function placements(petId: () => string): Placement[] {
  return [
    { name: 'path, after /v1/', request: (text) => ({ path: `/v1/${text}` }) },
    { name: 'path, first segment', request: (text) => ({ path: `/${text}` }) },
    { name: 'path, after /v1/pets/', request: (text) => ({ path: `/v1/pets/${text}` }) },
    { name: 'path, of a DELETE', request: (text) => ({ method: 'DELETE', path: `/v1/pets/${text}` }) },
    { name: 'path, on the metrics listener', request: (text) => ({ path: `/${text}`, metrics: true }) },
    { name: 'query name, on the metrics listener', request: (text) => ({ path: `/metrics?${text}=1`, metrics: true }) },
    { name: 'query parameter name', request: (text) => ({ path: `/v1/pets?${text}=1` }) },
    { name: 'query parameter name, of a create', request: (text) => ({ ...post({}), path: `/v1/pets?${text}=1` }) },
    { name: 'query value of cursor', request: (text) => ({ path: `/v1/pets?cursor=${text}` }) },
    { name: 'query value of status', request: (text) => ({ path: `/v1/pets?status=${text}` }) },
    { name: 'query value of an unknown parameter', request: (text) => ({ path: `/v1/pets?api_key=${text}` }) },
    { name: 'method', request: (text) => ({ method: text }) },
    { name: 'Authorization: Bearer <key>', request: (text) => ({ headers: { authorization: `Bearer ${text}` } }) },
    { name: 'Authorization: Basic <key>', request: (text) => ({ headers: { authorization: `Basic ${text}` } }) },
    { name: 'Authorization: Bearer <key> extra', request: (text) => ({ headers: { authorization: `Bearer ${text} extra` } }) },
    { name: 'Authorization: <key>', request: (text) => ({ headers: { authorization: text } }) },
    { name: 'X-Request-Id', request: (text) => ({ headers: { 'x-request-id': text } }) },
    { name: 'Idempotency-Key', stored: true, request: (text) => post({ 'idempotency-key': text }) },
    { name: 'Content-Type', request: (text) => post({ 'content-type': text }) },
    { name: 'Content-Type charset', request: (text) => post({ 'content-type': `application/json; charset=${text}` }) },
    { name: 'If-None-Match', request: (text) => ({ path: `/v1/pets/${petId()}`, headers: { 'if-none-match': `"${text}"` } }) },
    { name: 'Origin', request: (text) => ({ headers: { origin: text } }) },
    {
      name: 'a CORS preflight',
      request: (text) => ({
        method: 'OPTIONS',
        headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': text, 'access-control-request-headers': text },
      }),
    },
    { name: 'User-Agent', request: (text) => ({ headers: { 'user-agent': text } }) },
    { name: 'Referer', request: (text) => ({ headers: { referer: `https://example.com/${text}` } }) },
    { name: 'Host', request: (text) => ({ headers: { host: text } }) },
    { name: 'Cookie', request: (text) => ({ headers: { cookie: `session=${text}` } }) },
    { name: 'traceparent', request: (text) => ({ headers: { traceparent: text } }) },
    { name: 'an arbitrary header, X-Foo', request: (text) => ({ headers: { 'x-foo': text } }) },
    { name: 'a header name', request: (text) => ({ headers: { [`x-${text}`]: '1' } }) },
    { name: 'body member name', json: true, request: (text) => post({}, `{"name":"Rex","categoryId":1,"${text}":1}`) },
    { name: 'body member value', json: true, stored: true, request: (text) => post({}, `{"name":"${text}","categoryId":1}`) },
    { name: 'body enum value', json: true, request: (text) => post({}, `{"name":"Rex","categoryId":1,"status":"${text}"}`) },
    { name: 'body, a JSON string never closed', json: true, request: (text) => post({}, `{"name":"${text}`) },
    { name: 'body, not JSON, sent as JSON', request: (text) => post({}, text) },
    { name: 'body, not JSON, sent as text', request: (text) => post({ 'content-type': 'text/plain' }, text) },
  ]
}

const ALLOWED_ORIGIN = 'https://app.example.com'

interface Answer {
  status: number
  /** Status line, headers and body, as they came. */
  raw: string
  body: string
}

/** Sends `sent` as bytes on a connection of its own, with `Connection: close`, and reads the answer until the server closes. */
function send(port: number, sent: Sent, defaults: Record<string, string>): Promise<Answer> {
  const headers = new Map<string, [string, string]>()
  for (const [name, value] of Object.entries(defaults)) headers.set(name.toLowerCase(), [name, value])
  for (const [name, value] of Object.entries(sent.headers ?? {})) {
    if (value === null) headers.delete(name.toLowerCase())
    else headers.set(name.toLowerCase(), [name, value])
  }
  if (sent.body !== undefined) headers.set('content-length', ['Content-Length', String(Buffer.byteLength(sent.body))])
  const head = [`${sent.method ?? 'GET'} ${sent.path ?? '/v1/pets'} HTTP/1.1`, ...[...headers.values()].map(([name, value]) => `${name}: ${value}`)]
  const bytes = `${head.join('\r\n')}\r\n\r\n${sent.body ?? ''}`
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes))
    let raw = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (raw += chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // The server may answer and close before it has read all we sent; the answer is what counts.
      if (error.code !== 'ECONNRESET' || raw === '') reject(error)
    })
    socket.on('close', () => {
      const end = raw.indexOf('\r\n\r\n')
      if (end === -1) reject(new Error(`no answer to ${JSON.stringify(bytes.slice(0, 120))}: ${JSON.stringify(raw)}`))
      else resolve({ status: Number(raw.split(' ')[1]), raw, body: dechunk(raw.slice(0, end), raw.slice(end + 4)) })
    })
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer within 10 s to ${JSON.stringify(bytes.slice(0, 120))}`)))
  })
}

/** The body as sent, whatever its framing. Chunk sizes count bytes: a redacted key's `…` is three. */
function dechunk(head: string, body: string): string {
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return body
  const chunks: Buffer[] = []
  for (let rest = Buffer.from(body); ; ) {
    const line = rest.indexOf('\r\n')
    const size = Number.parseInt(rest.subarray(0, line).toString(), 16)
    if (!(size > 0)) return Buffer.concat(chunks).toString()
    chunks.push(rest.subarray(line + 2, line + 2 + size))
    rest = rest.subarray(line + 2 + size + 2)
  }
}

/** `text` with every percent-encoding (at any depth) and every \u or \x escape (however often its backslash was escaped) undone. */
function decodeAll(text: string): string {
  let previous
  let decoded = text
  do {
    previous = decoded
    decoded = decoded
      .replace(/%([0-9a-f]{2})/gi, (_, code: string) => String.fromCharCode(Number.parseInt(code, 16)))
      .replace(/\\+(?:u([0-9a-f]{4})|x([0-9a-f]{2}))/gi, (_, u?: string, x?: string) => String.fromCharCode(Number.parseInt(u ?? x ?? '', 16)))
  } while (decoded !== previous)
  return decoded
}

/** The parts of `secrets` that `text` shows in any encoding: any 8 characters in a row of one of them. */
function leaked(text: string, secrets: readonly string[]): string[] {
  const decoded = decodeAll(text)
  const shown: string[] = []
  for (const secret of secrets) {
    for (let i = 0; i + 8 <= secret.length; i++) {
      if (decoded.includes(secret.slice(i, i + 8))) {
        shown.push(secret.slice(i, i + 8))
        break
      }
    }
  }
  return shown
}

/** An OTLP/HTTP endpoint that keeps every export's body as text: a key is looked for in all of it. */
async function startSpanSink(): Promise<{ endpoint: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = []
  const server = http.createServer((request, response) => {
    let body = ''
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk))
    request.on('end', () => {
      bodies.push(body)
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    bodies,
    async close() {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

describe('redactKeys and containsKey', () => {
  const secret = 'Q1SokAbCdEfGhIjKlMnOpQrStUvWxYz0'
  const forms = { ...ENCODINGS, ...JSON_ENCODINGS, 'a JSON escape escaped in turn': (key: string) => `\\\\u0070${key.slice(1)}`, 'an \\x escape': (key: string) => `\\x70${key.slice(1)}` }
  for (const environment of ['live', 'test']) {
    for (const [name, encode] of Object.entries(forms)) {
      it(`finds and redacts a ps_${environment}_ key, ${name}, whole, and cut short, amid other text`, () => {
        for (const key of [`ps_${environment}_${secret}`, `ps_${environment}_${secret.slice(0, 20)}`]) {
          const text = `GET /v1/${encode(key)}/x?a=1 "${encode(key)}"`
          assert.ok(containsKey(text), text)
          assert.equal(redactKeys(text), `GET /v1/ps_${environment}_…[redacted]/x?a=1 "ps_${environment}_…[redacted]"`)
        }
      })
    }
  }

  const other = 'ZyXwVuTsRqPoNmLkJiHgFeDcBa987654'
  const otherEnvironment = (key: string) => key.replace(/_(live|test)_/, (_, environment: string) => (environment === 'live' ? '_test_' : '_live_'))
  const arrangements = { ...ARRANGEMENTS, 'a key touching one of the other environment': (a: string, b: string) => a + otherEnvironment(b) }
  for (const environment of ['live', 'test']) {
    for (const [arrangement, arrange] of Object.entries(arrangements)) {
      it(`redacts every ps_${environment}_ key of ${arrangement}, in each of ${Object.keys(forms).length} encodings`, () => {
        const problems: string[] = []
        for (const [name, encode] of Object.entries(forms)) {
          const text = `GET /v1/${encode(arrange(`ps_${environment}_${secret}`, `ps_${environment}_${other}`))}/x?a=1`
          const redacted = redactKeys(text)
          const shown = leaked(redacted, [secret, other])
          if (!containsKey(text)) problems.push(`${name}: not found in ${text}`)
          if (shown.length > 0) problems.push(`${name}: ${redacted} shows ${shown.join(', ')}`)
          if (!redacted.startsWith('GET /v1/') || !redacted.endsWith('/x?a=1')) problems.push(`${name}: more than the keys redacted: ${redacted}`)
        }
        assert.deepEqual(problems, [])
      })
    }
  }

  it('leaves alone what only looks near a key: a key id, a bare prefix, encoded text of other characters, a request line', () => {
    for (const text of [
      '{"level":30,"pid":1,"hostname":"h","reqId":"r","method":"GET","route":"/v1/pets/:petId","status":200,"keyId":"key_AbCdEfGhIjKlMnOp","msg":"request"}',
      'ps_live_',
      'ps_live_%2F%2F',
      '/v1/pets?cursor=%7B%22a%22%3A1%7D',
      'maps_of_tests',
      '%70%73%20live',
      'C:\\x70s\\live',
    ]) {
      assert.equal(containsKey(text), false, text)
      assert.equal(redactKeys(text), text)
    }
  })
})

/** What is sent, made of a key the service issued (`issued`) and one it never did (`unknown`). */
const SENT_KEYS: Record<string, (issued: string, unknown: string) => string> = {
  'a key the service issued': (issued) => issued,
  'a key-shaped key it never issued': (_issued, unknown) => unknown,
  ...ARRANGEMENTS,
}
const COMBINATIONS = placements(() => '').reduce(
  (sum, placement) =>
    sum + (Object.keys(ENCODINGS).length + (placement.json === true ? Object.keys(JSON_ENCODINGS).length : 0)) * Object.keys(SENT_KEYS).length,
  0,
)

const unknownKey = `ps_live_${Array.from({ length: 32 }, () => BASE62[randomInt(BASE62.length)]).join('')}`

for (const engine of DIRECT_ENGINES) {
  describe(`redaction of a key in the wrong place, on ${engine}: ${COMBINATIONS} combinations`, () => {
    let database: TestDatabase
    let sink: Awaited<ReturnType<typeof startSpanSink>>
    let server: ServerProcess
    let metricsPort: number
    let issuedKey: string
    let petId: string
    const sentBy = new Map<string, string>()
    let sequence = 0

    before(async () => {
      const dir = trackedTempDir('petstore-redaction-')
      database = await createTestDatabase(engine, dir)
      issuedKey = await createKey({ PATH: process.env.PATH ?? '', ...database.env }, 'redaction')
      sink = await startSpanSink()
      metricsPort = await freePort()
      server = await startServer(
        {
          ...database.env,
          LOG_LEVEL: 'info',
          METRICS_PORT: String(metricsPort),
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          CORS_ORIGINS: ALLOWED_ORIGIN,
          // Every combination must reach the part that would echo it, not a 429.
          RATE_LIMIT_PER_KEY: '0',
          RATE_LIMIT_FAILED_AUTH_PER_IP: '0',
        },
        dir,
      )
      const created = await fetch(`${server.baseUrl}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${issuedKey}`, 'content-type': 'application/json' },
        body: '{"name":"Kept","categoryId":1}',
      })
      assert.equal(created.status, 201, await created.clone().text())
      petId = String(((await created.json()) as { id: number | string }).id)
    })
    after(async () => {
      if (server !== undefined && server.exit === undefined) await stopServer(server).catch(() => undefined)
      await sink?.close()
      await database?.drop()
    })

    const keys = Object.fromEntries(Object.entries(SENT_KEYS).map(([name, make]) => [name, () => make(issuedKey, unknownKey)]))

    // Per place: its encodings × what is sent (each key alone, and the arrangements of both), each request checked as it is answered.
    for (const placement of placements(() => petId)) {
      const encodings = { ...ENCODINGS, ...(placement.json === true ? JSON_ENCODINGS : {}) }
      const count = Object.keys(encodings).length * Object.keys(keys).length
      it(`echoes no key put in the ${placement.name}: ${count} combinations`, async () => {
        const problems: string[] = []
        for (const [keyName, key] of Object.entries(keys)) {
          for (const [encodingName, encode] of Object.entries(encodings)) {
            const what = `${placement.name}, ${encodingName}, ${keyName}`
            const requestId = `grid-${++sequence}`
            sentBy.set(requestId, what)
            const sent = placement.request(encode(key()))
            const answer = await send(sent.metrics === true ? metricsPort : server.port, sent, {
              Host: '127.0.0.1',
              Authorization: `Bearer ${issuedKey}`,
              'X-Request-Id': requestId,
              Connection: 'close',
            })
            const shown = leaked(answer.raw, [issuedKey.slice(PREFIX_LENGTH), unknownKey.slice(PREFIX_LENGTH)])
            if (shown.length > 0) problems.push(`${what}: the answer shows ${shown.join(', ')}:\n${answer.raw}`)
            if (answer.status === 500) problems.push(`${what}: 500: ${answer.body}`)
            if (placement.stored === true && answer.status !== 400) problems.push(`${what}: ${answer.status}, not refused: ${answer.body}`)
            if (placement.name === 'X-Request-Id' && !/\r\nx-request-id: [0-9a-f-]{36}\r\n/.test(answer.raw)) problems.push(`${what}: its id was kept`)
            if (answer.status >= 400) {
              const body = JSON.parse(answer.body) as Record<string, unknown>
              if (Object.keys(body).sort().join() !== 'code,message,status') problems.push(`${what}: not the error shape: ${answer.body}`)
            }
          }
        }
        assert.deepEqual(problems, [])
      })
    }

    it('writes no key to any log line, span or metric, whatever the place and encoding', { timeout: 60_000 }, async () => {
      const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      assert.equal(scrape.status, 200)
      const metrics = await scrape.text()
      // SIGTERM flushes the spans still queued, and the log lines.
      assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())

      const secrets = [issuedKey.slice(PREFIX_LENGTH), unknownKey.slice(PREFIX_LENGTH)]
      const lines = server.output().split('\n')
      const requestLines = lines.filter((line) => line.includes('"msg":"request"'))
      // Every combination was logged, so each was looked at.
      // Most combinations were logged under their request id, so their lines were looked at (the metrics
      // listener logs no requests, and a refused X-Request-Id or method never becomes one).
      const logged = new Set(requestLines.map((line) => /"reqId":"(grid-\d+)"/.exec(line)?.[1]))
      assert.ok(logged.size > sentBy.size / 2, `${logged.size} of ${sentBy.size} requests logged`)
      const leakingLines = lines
        .filter((line) => leaked(line, secrets).length > 0)
        .map((line) => `${sentBy.get(/"reqId":"(grid-\d+)"/.exec(line)?.[1] ?? '') ?? 'no grid request'}: ${line}`)
      assert.deepEqual(leakingLines, [], 'log lines')

      const spans = sink.bodies.join('\n')
      // The spans of the requests that carried a key were exported, redacted.
      assert.match(spans, /url\.path/)
      assert.match(spans, /ps_live_…\[redacted\]/)
      assert.deepEqual(leaked(spans, secrets), [], 'spans')
      assert.deepEqual(leaked(metrics, secrets), [], 'metrics')
    })
  })
}
