import assert from 'node:assert/strict'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { LINGER_MAX_BYTES, MAX_HEADER_LINES } from '../../src/http/http-protocol.js'
import { DIRECT_ENGINES, type TestApp, buildTestApp, listPetsText } from '../helper.js'

// Every byte a client can send gets an answer of the service's own: the error shape, X-Request-Id and
// Cache-Control: no-store, even where Node's HTTP layer would answer (or not answer) by itself.

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
  /** What came after this response on the connection. */
  rest: string
}

/** The first HTTP response in `raw`, read by its Content-Length or chunked framing. */
function parseResponse(raw: string): RawResponse | undefined {
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine = '', ...headerLines] = raw.slice(0, end).split('\r\n')
  const headers = Object.fromEntries(
    headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  )
  let body = raw.slice(end + 4)
  let rest = ''
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length'])
    const bytes = Buffer.from(body)
    if (bytes.length < length) return undefined
    body = bytes.subarray(0, length).toString()
    rest = bytes.subarray(length).toString()
  } else if (headers['transfer-encoding'] === 'chunked') {
    if (!body.endsWith('0\r\n\r\n')) return undefined
    body = body.replace(/(^|\r\n)[0-9a-f]+\r\n/g, '').replace(/\r\n$/, '')
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body, rest }
}

/** Sends `bytes` on a new connection and resolves with the first response, whether or not the server closes. */
function exchange(port: number, bytes: string | Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes))
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      answer += chunk
      const response = parseResponse(answer)
      if (response !== undefined) {
        socket.destroy()
        resolve(response)
      }
    })
    socket.on('close', () => reject(new Error(`closed without a whole response: ${JSON.stringify(answer)}`)))
    socket.on('error', reject)
    socket.setTimeout(8_000, () => socket.destroy(new Error(`no answer to ${JSON.stringify(String(bytes).slice(0, 80))}`)))
  })
}

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

interface ContinueExchange {
  /** Whether `100 Continue` came before the final answer. */
  continued: boolean
  response: RawResponse
  /** The answer to the request sent next on the same connection; undefined when the connection ended instead. */
  next: RawResponse | undefined
}

/**
 * Sends `head`, a request's head with `Expect: 100-continue`, and its `body` only once `100 Continue`
 * comes, as curl and .NET do. After the final answer, sends the request `next` makes of it on the same
 * connection: after the body, if the body was held back, as a client does that sends it anyway (curl,
 * after a second without an answer). It ends the connection when the server does.
 */
function exchangeExpectingContinue(port: number, head: string, body: string, next: (response: RawResponse) => string): Promise<ContinueExchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head))
    let received = ''
    let continued = false
    let response: RawResponse | undefined
    const settle = (second: RawResponse | undefined) => {
      socket.destroy()
      if (response === undefined) reject(new Error(`no whole answer: ${JSON.stringify(received)}`))
      else resolve({ continued, response, next: second })
    }
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      received += chunk
      if (response === undefined) {
        if (!continued && received.startsWith(CONTINUE)) {
          continued = true
          received = received.slice(CONTINUE.length)
          socket.write(body)
        }
        response = parseResponse(received)
        if (response === undefined) return
        received = response.rest
        socket.write(`${continued ? '' : body}${next(response)}`)
      }
      const second = parseResponse(received)
      if (second !== undefined) settle(second)
    })
    // A reset is an end too: the server closed with the next request unread.
    socket.on('error', () => settle(undefined))
    socket.on('close', () => settle(undefined))
    socket.setTimeout(5_000, () => {
      reject(new Error(`neither an answer to the next request nor the connection's end: ${JSON.stringify(received)}`))
      socket.destroy()
    })
  })
}

/** Resolves once `server` holds no connection: what it read has been acted upon, or dropped. */
async function connectionsClosed(server: net.Server): Promise<void> {
  const count = () => new Promise<number>((resolve, reject) => server.getConnections((error, n) => (error ? reject(error) : resolve(n))))
  while ((await count()) > 0) await sleep(10)
}

/** Asserts the service's own error answer: status, code, the exact shape, a request id and no-store. */
function assertServiceError(response: RawResponse, status: number, code: string): { message: string } {
  assert.equal(response.status, status, response.body)
  assert.match(response.headers['content-type'] ?? '', /^application\/json/)
  assert.match(response.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/, 'no X-Request-Id')
  assert.equal(response.headers['cache-control'], 'no-store')
  const body = JSON.parse(response.body) as { code: string; message: string; status: number }
  assert.deepEqual(Object.keys(body), ['code', 'message', 'status'])
  assert.equal(body.code, code)
  assert.equal(body.status, status)
  return body
}

const KEY_SHAPE = /ps_(live|test)_[A-Za-z0-9]/

for (const engine of DIRECT_ENGINES) {
  describe(`the wire on ${engine}`, () => {
    let testApp: TestApp
    let port: number
    let key: string
    before(async () => {
      testApp = await buildTestApp(engine, { env: { REQUEST_TIMEOUT_MS: '2000', HEADERS_TIMEOUT_MS: '1000' } })
      key = await testApp.createKey()
      await testApp.app.listen({ port: 0, host: '127.0.0.1' })
      port = (testApp.app.server.address() as net.AddressInfo).port
    })
    after(() => testApp.close())

    describe("answers that were Node's", () => {
      it('answers an HTTP/1.1 request without Host with 400 in the error shape', async () => {
        const body = assertServiceError(await exchange(port, 'GET /v1/pets HTTP/1.1\r\n\r\n'), 400, 'invalid_request')
        assert.match(body.message, /Host/)
      })

      it('serves an HTTP/1.0 request without Host, which needs none', async () => {
        const response = await exchange(port, `GET /v1/pets HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`)
        assert.equal(response.status, 200, response.body)
      })

      it('answers an Expect other than 100-continue with 417 expectation_failed', async () => {
        const response = await exchange(port, 'POST /v1/pets HTTP/1.1\r\nHost: a\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\n{}')
        assertServiceError(response, 417, 'expectation_failed')
      })

      it('answers CONNECT with 405 in the error shape instead of closing the connection unanswered', async () => {
        const response = await exchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
        assertServiceError(response, 405, 'method_not_allowed')
        assert.equal(response.headers.allow, '')
      })

      for (const [what, bytes] of [
        ['Content-Length with Transfer-Encoding', 'POST /v1/pets HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
        ['a chunk size that is not hexadecimal', 'POST /v1/pets HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'],
        ['a header line ending in a bare CR', 'GET /v1/pets HTTP/1.1\r\nHost: a\rX: y\r\n\r\n'],
        ['bytes that are not HTTP', 'THIS IS NOT HTTP\r\n\r\n'],
      ] as const) {
        it(`answers ${what} with 400 carrying X-Request-Id`, async () => {
          assertServiceError(await exchange(port, bytes), 400, 'invalid_request')
        })
      }

      it('answers a header block over 16 KiB with 431 carrying X-Request-Id', async () => {
        const response = await exchange(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`)
        assertServiceError(response, 431, 'request_header_fields_too_large')
      })

      it('answers a request that does not arrive in time with 408 carrying X-Request-Id', async () => {
        // Headers never finished: the 1 s headers timeout of this app ends it.
        assertServiceError(await exchange(port, 'GET /v1/pets HTTP/1.1\r\nHost: a\r\n'), 408, 'request_timeout')
      })
    })

    describe('ambiguous requests are refused, not guessed at', () => {
      for (const name of ['Host', 'Authorization', 'Content-Type']) {
        it(`refuses two ${name} headers with 400`, async () => {
          const headers = {
            Host: 'Host: a\r\nHost: b\r\n',
            Authorization: `Host: a\r\nAuthorization: Bearer ${key}\r\nAuthorization: Bearer ps_live_other\r\n`,
            'Content-Type': `Host: a\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\n`,
          }[name]
          const body = '{"name":"Twice","categoryId":1}'
          const response = await exchange(port, `POST /v1/pets HTTP/1.1\r\n${headers}Content-Length: ${body.length}\r\n\r\n${body}`)
          const error = assertServiceError(response, 400, 'invalid_request')
          assert.match(error.message, new RegExp(`${name} header was sent more than once`))
        })
      }

      describe('single-valued headers in every casing and position', () => {
        // Each of the five headers a request may carry once, in four casings, once or twice (every pair of
        // casings), at the start, the end or both ends of the header block; and names of the same length
        // that differ by one character, sent twice, which are not single-valued. The answer must be what a
        // case-insensitive comparison of the names gives, and the 400 names the second line as sent.
        const casings: Record<string, (name: string) => string> = {
          lower: (name) => name,
          upper: (name) => name.toUpperCase(),
          title: (name) => name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase()),
          alternating: (name) => [...name].map((char, i) => (i % 2 === 1 ? char.toUpperCase() : char)).join(''),
        }
        const singles = ['host', 'authorization', 'content-type', 'idempotency-key', 'x-request-id'] as const
        const nearMisses = ['hast', 'authorizatiom', 'content-typo', 'content_type', 'idempotency-kez', 'x-request-ie']
        const valueOf = (name: string): string =>
          ({ host: 'a', authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'grid-key', 'x-request-id': 'grid-id' })[
            name.toLowerCase()
          ] ?? 'x'
        /** Sends GET /v1/pets with Host and Authorization (unless `lines` carries them), an Accept, and `lines` where `positions` say. */
        const send = (lines: string[], positions: ('start' | 'end')[]) => {
          const given = new Set(lines.map((line) => line.toLowerCase()))
          const middle = [...['host', 'authorization'].filter((name) => !given.has(name)), 'accept'].map((name) =>
            name === 'accept' ? 'Accept: */*' : `${name}: ${valueOf(name)}`,
          )
          const start = lines.filter((_, i) => positions[i] === 'start').map((name) => `${name}: ${valueOf(name)}`)
          const end = lines.filter((_, i) => positions[i] === 'end').map((name) => `${name}: ${valueOf(name)}`)
          const block = [...start, ...middle, ...end].map((line) => `${line}\r\n`).join('')
          return exchange(port, `GET /v1/pets?limit=1 HTTP/1.1\r\n${block}\r\n`)
        }
        const PLACES: [string, ('start' | 'end')[]][] = [
          ['at the start', ['start', 'start']],
          ['at the end', ['end', 'end']],
          ['at both ends', ['start', 'end']],
        ]

        for (const single of singles) {
          it(`serves ${single} sent once, in any casing, at the start or the end`, async () => {
            const wrong: string[] = []
            for (const [casing, spell] of Object.entries(casings)) {
              for (const place of ['start', 'end'] as const) {
                const response = await send([spell(single)], [place])
                if (response.status !== 200) wrong.push(`${casing} at the ${place}: ${response.status} ${response.body}`)
              }
            }
            assert.deepEqual(wrong, [])
          })

          it(`refuses ${single} sent twice, in every pair of casings and places, naming the second line`, async () => {
            const wrong: string[] = []
            for (const [firstCasing, spellFirst] of Object.entries(casings)) {
              for (const [secondCasing, spellSecond] of Object.entries(casings)) {
                for (const [place, positions] of PLACES) {
                  const second = spellSecond(single)
                  const response = await send([spellFirst(single), second], positions)
                  const expected = `The ${second} header was sent more than once; send it once.`
                  const body = JSON.parse(response.body) as { code?: string; message?: string }
                  if (response.status !== 400 || body.code !== 'invalid_request' || body.message !== expected) {
                    wrong.push(`${firstCasing} then ${secondCasing} ${place}: ${response.status} ${response.body}`)
                  }
                }
              }
            }
            assert.deepEqual(wrong, [])
          })
        }

        it('serves names one character away from a single-valued header sent twice, alone or with that header', async () => {
          const wrong: string[] = []
          for (const nearMiss of nearMisses) {
            for (const [casing, spell] of Object.entries(casings)) {
              for (const [place, positions] of PLACES) {
                const response = await send([spell(nearMiss), spell(nearMiss)], positions)
                if (response.status !== 200) wrong.push(`${nearMiss} ${casing} ${place}: ${response.status} ${response.body}`)
              }
            }
          }
          const response = await send(['Content-Type', 'content_type', 'CONTENT-TYPO'], ['start', 'end', 'end'])
          if (response.status !== 200) wrong.push(`Content-Type with content_type and CONTENT-TYPO: ${response.status} ${response.body}`)
          assert.deepEqual(wrong, [])
        })
      })

      it('creates nothing when it refuses two Authorization headers', async () => {
        assert.doesNotMatch(await listPetsText(testApp, key), /Twice/)
      })

      for (const bytes of ['GET /v1/pets\r\n\r\n', 'GET /v1/pets\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n']) {
        it(`refuses a request line without an HTTP version (${JSON.stringify(bytes.slice(0, 16))}…) with 400`, async () => {
          const body = assertServiceError(await exchange(port, bytes), 400, 'invalid_request')
          assert.match(body.message, /protocol version/)
        })
      }

      it(`refuses more than ${MAX_HEADER_LINES} header lines with 431 instead of dropping the rest`, async () => {
        const filler = Array.from({ length: MAX_HEADER_LINES - 1 }, (_, i) => `X-F${i}: 1\r\n`).join('')
        // The line that would have been dropped past Node's limit is the one that matters.
        const response = await exchange(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\n${filler}Authorization: Bearer ${key}\r\n\r\n`)
        const body = assertServiceError(response, 431, 'request_header_fields_too_large')
        assert.match(body.message, new RegExp(`${MAX_HEADER_LINES + 1} header lines`))
      })

      it(`serves a request of exactly ${MAX_HEADER_LINES} header lines`, async () => {
        const filler = Array.from({ length: MAX_HEADER_LINES - 2 }, (_, i) => `X-F${i}: 1\r\n`).join('')
        const response = await exchange(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\n${filler}Authorization: Bearer ${key}\r\n\r\n`)
        assert.equal(response.status, 200, response.body)
      })
    })

    describe('routing comes first', () => {
      const cases = [
        ['DELETE', '/v1/pets', 'text/plain', 'hello', 'GET, HEAD, POST'],
        ['DELETE', '/v1/pets', 'application/json', '{x', 'GET, HEAD, POST'],
        ['PUT', '/v1/pets/1', 'application/json', `{"name":"${'x'.repeat(20 * 1024)}"}`, 'GET, HEAD'],
      ] as const
      for (const [method, path, type, body, allow] of cases) {
        it(`answers ${method} ${path} with a ${type} body of ${body.length} bytes with 405 before reading the body`, async () => {
          const response = await exchange(
            port,
            `${method} ${path} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          )
          assertServiceError(response, 405, 'method_not_allowed')
          assert.equal(response.headers.allow, allow)
        })
      }

      for (const method of ['TRACE', 'PROPFIND', 'PURGE', 'QUERY', 'MKCOL', 'M-SEARCH']) {
        it(`answers ${method} on a known path with 405 and Allow`, async () => {
          const response = await exchange(port, `${method} /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`)
          assertServiceError(response, 405, 'method_not_allowed')
          assert.equal(response.headers.allow, 'GET, HEAD, POST')
        })
      }

      // Node's parser refuses a method it does not know before there is a request to route.
      for (const [method, path] of [
        ['FOO', '/v1/pets'],
        ['BREW', '/v1/pets/1'],
        ['get', '/v1/pets'],
        ['post', '/v1/pets'],
        ['Get', '/healthz'],
        ['DESCRIBE', '/v1/pets'],
        ['FOO', '/v1/nothing'],
      ] as const) {
        it(`answers the unrecognised method ${method} on ${path} with 501 not_implemented, whatever the path`, async () => {
          const response = await exchange(port, `${method} ${path} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`)
          const body = assertServiceError(response, 501, 'not_implemented')
          assert.match(body.message, new RegExp(`method ${method} `))
          assert.equal(response.headers.connection, 'close')
        })
      }

      for (const [what, bytes] of [
        ['a method with a tab in it', 'GET\t /v1/pets HTTP/1.1\r\nHost: a\r\n\r\n'],
        ['a request line of four words', 'THIS IS NOT HTTP\r\n\r\n'],
      ] as const) {
        it(`answers ${what} with 400, not 501: the request line itself is malformed`, async () => {
          assertServiceError(await exchange(port, bytes), 400, 'invalid_request')
        })
      }

      it('answers an unknown method on an unknown path with 404', async () => {
        assertServiceError(await exchange(port, 'PROPFIND /v1/nothing HTTP/1.1\r\nHost: a\r\n\r\n'), 404, 'not_found')
      })
    })

    describe('a body far over the limit', () => {
      /**
       * Writes a 10 MB body before reading anything, as a naive client does, and returns what came
       * back. A reset (the kernel's answer to a close with unread data) would fail the write.
       */
      function sendHugeBody(chunked: boolean): Promise<{ response: RawResponse | undefined; written: number; error?: string }> {
        const size = 10 * 1024 * 1024
        return new Promise((resolve) => {
          const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
          let answer = ''
          let written = 0
          socket.setEncoding('utf8')
          socket.on('data', (chunk: string) => (answer += chunk))
          socket.on('error', (error: NodeJS.ErrnoException) => resolve({ response: parseResponse(answer), written, error: error.code ?? error.message }))
          socket.on('close', () => resolve({ response: parseResponse(answer), written }))
          socket.setTimeout(20_000, () => socket.destroy(new Error('timeout')))
          const framing = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${size}`
          socket.write(`POST /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`)
          const piece = Buffer.alloc(64 * 1024, 0x61)
          const pump = () => {
            while (written < size) {
              written += piece.length
              const ok = socket.write(chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece)
              if (!ok) {
                socket.once('drain', pump)
                return
              }
            }
            socket.end(chunked ? '0\r\n\r\n' : '')
          }
          pump()
        })
      }

      for (const chunked of [false, true]) {
        it(`lets a client that writes 10 MB ${chunked ? 'chunked' : 'with Content-Length'} before reading read its 413`, { timeout: 30_000 }, async () => {
          const { response, written, error } = await sendHugeBody(chunked)
          assert.equal(error, undefined, `the client's write failed after ${written} bytes: ${error}`)
          assert.equal(written, 10 * 1024 * 1024)
          assert.ok(response !== undefined, 'no response')
          assertServiceError(response, 413, 'payload_too_large')
          // And the server goes on serving.
          const next = await exchange(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`)
          assert.equal(next.status, 200)
        })
      }

      it(`stops reading after ${LINGER_MAX_BYTES / 1024 / 1024} MiB`, () => {
        // Bounded, not forever: a client cannot keep a connection reading for as long as it likes.
        assert.ok(LINGER_MAX_BYTES >= 10 * 1024 * 1024 && LINGER_MAX_BYTES <= 256 * 1024 * 1024)
      })
    })

    describe('Expect: 100-continue', () => {
      // A valid pet with a name that is not ASCII and the largest categoryId: stored exactly, or visibly not.
      const pet = '{"name":"Ëxpect 🐕","categoryId":9223372036854775807}'
      const post = (headers: string, body: string = pet) =>
        `POST /v1/pets HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`
      const json = 'Content-Type: application/json\r\n'
      // Each is decided from the request's head: the client is told before it sends a body for nothing.
      const tooLarge = 'x'.repeat(20_000)
      const refusals: { what: string; headers: () => Promise<string>; body?: string; status: number; code: string }[] = [
        { what: 'no API key', headers: () => Promise.resolve(json), status: 401, code: 'unauthorized' },
        { what: 'a wrong API key', headers: () => Promise.resolve(`Authorization: Bearer ${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}\r\n${json}`), status: 401, code: 'unauthorized' },
        {
          what: 'a valid API key without pets:write',
          headers: async () => `Authorization: Bearer ${await testApp.createKey({ name: 'reader', scopes: ['pets:read'] })}\r\n${json}`,
          status: 403,
          code: 'forbidden',
        },
        { what: 'a body that is not JSON', headers: () => Promise.resolve(`Authorization: Bearer ${key}\r\nContent-Type: text/plain\r\n`), status: 415, code: 'unsupported_media_type' },
        { what: 'a Content-Length over the limit', headers: () => Promise.resolve(`Authorization: Bearer ${key}\r\n${json}`), body: tooLarge, status: 413, code: 'payload_too_large' },
      ]
      for (const { what, headers, body = pet, status, code } of refusals) {
        it(`answers ${what} with ${status} before 100 Continue, then closes, acting on nothing sent after`, async () => {
          const after = `{"name":"After ${status} ${what}","categoryId":1}`
          const create = () =>
            `POST /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n${json}Content-Length: ${Buffer.byteLength(after)}\r\n\r\n${after}`
          const sent = await exchangeExpectingContinue(port, post(await headers(), body), body, create)
          assert.equal(sent.continued, false, '100 Continue came before the refusal')
          assertServiceError(sent.response, status, code)
          // RFC 9110 §10.1.1: the client learns that the connection ends, so the body it held back cannot be
          // read as the next request; and RFC 9112 §9.6: nothing sent after a closing answer is acted upon.
          assert.equal(sent.response.headers.connection, 'close')
          assert.equal(sent.next, undefined, `the request after the refusal was answered: ${JSON.stringify(sent.next)}`)
          await connectionsClosed(testApp.app.server)
          assert.doesNotMatch(await listPetsText(testApp, key), new RegExp(`After ${status}`))
        })
      }

      it('sends 100 Continue to a valid API key, then creates the pet from the body exactly and keeps the connection', async () => {
        const sent = await exchangeExpectingContinue(port, post(`Authorization: Bearer ${key}\r\n${json}`), pet, (created) => {
          const { id } = JSON.parse(created.body) as { id: number }
          return `GET /v1/pets/${id} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`
        })
        assert.equal(sent.continued, true)
        assert.equal(sent.response.status, 201, sent.response.body)
        assert.match(sent.response.body, /^\{"id":\d+,"name":"Ëxpect 🐕","categoryId":9223372036854775807\}$/)
        assert.equal(sent.response.headers.connection, 'keep-alive')
        assert.equal(sent.next?.status, 200)
        assert.equal(sent.next.body, sent.response.body)
      })
    })

    describe('an API key in the wrong place', () => {
      const secret = 'ps_live_Zx9Qm2Lr7Tb4Wc8Yn1Kd5Hs3Jf6Gp0Va'
      const leaks = () => [...testApp.logs.map((line) => JSON.stringify(line))].filter((line) => KEY_SHAPE.test(line))

      it('is redacted from a 404 that names the path, and from the log line', async () => {
        const response = await exchange(port, `GET /v1/${secret} HTTP/1.1\r\nHost: a\r\n\r\n`)
        const body = assertServiceError(response, 404, 'not_found')
        assert.equal(body.message, 'No route GET /v1/ps_live_…[redacted].')
        assert.deepEqual(leaks(), [])
      })

      it('is redacted when percent-encoded in a path', async () => {
        const response = await exchange(port, `GET /v1/ps%5Flive%5F${secret.slice(8)} HTTP/1.1\r\nHost: a\r\n\r\n`)
        assert.doesNotMatch(response.body, new RegExp(secret.slice(8)))
        assert.ok(testApp.logs.every((line) => !JSON.stringify(line).includes(secret.slice(8))))
      })

      for (const query of [`limit=${secret}`, `api_key=${secret}`, `${secret}=1`, `status=${secret}`]) {
        it(`is redacted from the 400 for the query string ${query.replace(secret, 'ps_live_…')}, and from the logs`, async () => {
          const response = await exchange(port, `GET /v1/pets?${query} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`)
          assertServiceError(response, 400, 'invalid_request')
          assert.doesNotMatch(response.body, KEY_SHAPE)
          assert.deepEqual(leaks(), [])
        })
      }

      it('is refused in a body field, named without being echoed, and nothing is stored', async () => {
        const response = await testApp.request(key, { method: 'POST', url: '/v1/pets', payload: { name: `my key is ${secret}`, categoryId: 1 } })
        assert.equal(response.statusCode, 400)
        assert.doesNotMatch(response.body, KEY_SHAPE)
        assert.match(response.body, /'name' holds an API key/)
        assert.doesNotMatch(await listPetsText(testApp, key), /my key is/)
        assert.deepEqual(leaks(), [])
      })

      it('is redacted when it is the name of an unknown body property', async () => {
        const response = await testApp.request(key, { method: 'POST', url: '/v1/pets', payload: { name: 'Rex', categoryId: 1, [secret]: true } })
        assert.equal(response.statusCode, 400)
        assert.match(response.body, /unknown property 'ps_live_…\[redacted\]'/)
        assert.deepEqual(leaks(), [])
      })

      it('is refused as an Idempotency-Key, which would be stored', async () => {
        const response = await testApp.request(key, {
          method: 'POST',
          url: '/v1/pets',
          headers: { 'idempotency-key': secret },
          payload: { name: 'Idem', categoryId: 1 },
        })
        assert.equal(response.statusCode, 400)
        assert.match(response.body, /'idempotency-key' holds an API key/)
        assert.doesNotMatch(response.body, KEY_SHAPE)
      })

      it('is never echoed as an X-Request-Id, nor logged as one', async () => {
        const response = await testApp.request(key, { method: 'GET', url: '/v1/pets', headers: { 'x-request-id': secret } })
        assert.equal(response.statusCode, 200)
        assert.match(String(response.headers['x-request-id']), /^[0-9a-f-]{36}$/)
        assert.deepEqual(leaks(), [])
      })

      it('in any other header reaches neither the answer nor the logs', async () => {
        const response = await testApp.request(key, { method: 'GET', url: '/v1/nothing', headers: { 'x-debug': secret, referer: `https://x/?k=${secret}` } })
        assert.equal(response.statusCode, 404)
        assert.doesNotMatch(response.body, KEY_SHAPE)
        assert.deepEqual(leaks(), [])
      })

      it('is still refused in a query string as a credential: only the Authorization header authenticates', async () => {
        const response = await testApp.app.inject({ method: 'GET', url: `/v1/pets?access_token=${key}` })
        assert.equal(response.statusCode, 401)
        assert.doesNotMatch(response.body, KEY_SHAPE)
      })
    })
  })
}
