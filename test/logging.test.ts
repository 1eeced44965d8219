import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import type { Logger } from 'pino'
import { asyncDestination, createLogger, flushLog, infoLines } from '../src/logger.js'
import { randomRequestId } from '../src/http/request-log.js'
import type { InjectOptions } from 'fastify'
import { DIRECT_ENGINES, type TestApp, type TestAppFixture, postPet, useTestApp } from './helper.js'

describe('request logging and request ids', () => {
  const fx = useTestApp('sqlite')

  it('writes exactly one info line per request with method, route, status, duration and request id', async () => {
    const before = fx.testApp.logs.length
    const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=5' })
    const lines = fx.testApp.logs.slice(before)
    assert.equal(lines.length, 1)
    const line = lines[0] ?? {}
    assert.equal(line.level, 30)
    assert.equal(line.msg, 'request')
    assert.equal(line.method, 'GET')
    assert.equal(line.route, '/v1/pets')
    assert.equal(line.status, 200)
    assert.equal(typeof line.durationMs, 'number')
    assert.equal(line.reqId, response.headers['x-request-id'])
  })

  it('names the error code of an error answer in its line, and none on a success', async () => {
    const before = fx.testApp.logs.length
    await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })
    await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets' })
    await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=0' })
    await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/nowhere' })
    await fx.testApp.request(fx.key, { method: 'DELETE', url: '/v1/pets' })
    const lines = fx.testApp.logs.slice(before).filter((line) => line.msg === 'request')
    assert.deepEqual(
      lines.map((line) => [line.status, line.code]),
      [
        [200, undefined],
        [401, 'unauthorized'],
        [400, 'invalid_request'],
        [404, 'not_found'],
        [405, 'method_not_allowed'],
      ],
    )
  })

  it("names the calling key by its public id, and no key on unauthenticated requests", async () => {
    const [record] = await fx.testApp.storage.apiKeys.list()
    const before = fx.testApp.logs.length
    await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })
    await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets' })
    const [authenticated, anonymous] = fx.testApp.logs.slice(before)
    assert.match(String(record?.id), /^key_/)
    assert.equal(authenticated?.keyId, record?.id)
    assert.equal(anonymous?.status, 401)
    assert.equal('keyId' in (anonymous ?? {}), false)
  })

  it('never writes the Authorization header or the key to the logs', async () => {
    await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })
    await fx.testApp.request(`${fx.key}wrong`, { method: 'GET', url: '/v1/pets' })
    await postPet(fx.testApp, fx.key, '{"name":1}')
    const text = JSON.stringify(fx.testApp.logs)
    assert.doesNotMatch(text, new RegExp(fx.key.slice(8)))
    assert.doesNotMatch(text, /Bearer/i)
  })

  it('echoes a sane X-Request-Id and uses it in the log line', async () => {
    const before = fx.testApp.logs.length
    const response = await fx.testApp.request(fx.key, {
      method: 'GET',
      url: '/v1/pets',
      headers: { 'x-request-id': 'client-abc.123:x' },
    })
    assert.equal(response.headers['x-request-id'], 'client-abc.123:x')
    assert.equal(fx.testApp.logs.slice(before)[0]?.reqId, 'client-abc.123:x')
  })

  it('replaces an insane X-Request-Id with a generated one', async () => {
    for (const given of ['has spaces', 'x'.repeat(129), 'quote"s', '']) {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets', headers: { 'x-request-id': given } })
      assert.match(String(response.headers['x-request-id']), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    }
  })

  it("logs an unknown route's path and answers its 404 with a key in it redacted, however the key is percent-encoded", async () => {
    const secret = fx.key.slice('ps_live_'.length)
    for (const path of [
      `/v1/ps_live_%${secret.charCodeAt(0).toString(16)}${secret.slice(1)}`,
      `/v1/%70s_live_${secret}`,
      `/v1/${[...fx.key].map((char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`).join('')}`,
    ]) {
      const before = fx.testApp.logs.length
      const response = await fx.testApp.app.inject({ method: 'GET', url: path })
      assert.equal(response.statusCode, 404)
      assert.equal((JSON.parse(response.body) as { message: string }).message, 'No route GET /v1/ps_live_…[redacted].', path)
      const line = fx.testApp.logs.slice(before)[0] ?? {}
      assert.equal(line.path, '/v1/ps_live_…[redacted]', path)
    }
  })

  it('logs unknown routes with their path', async () => {
    const before = fx.testApp.logs.length
    await fx.testApp.app.inject({ method: 'GET', url: '/nowhere?x=1' })
    const line = fx.testApp.logs.slice(before)[0] ?? {}
    assert.equal(line.route, null)
    assert.equal(line.path, '/nowhere')
    assert.equal(line.status, 404)
  })
})

/** The request lines `testApp` wrote while `send` ran. */
async function requestLinesOf(testApp: TestApp, send: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const before = testApp.logs.length
  await send()
  return testApp.logs.slice(before).filter((line) => line.msg === 'request')
}

/** The status and addresses of each request line. */
const addressesOf = (lines: Record<string, unknown>[]) => lines.map(({ status, clientAddress, peerAddress }) => ({ status, clientAddress, peerAddress }))

/** What everyAnswer gets: a success, the refusals of routing and validation, then failed authentications up to a 429. */
const EVERY_STATUS = [200, 400, 404, 405, 401, 401, 429]

/** The lines of EVERY_STATUS, each naming these addresses. */
const everyLineNaming = (clientAddress: string, peerAddress?: string) =>
  EVERY_STATUS.map((status) => ({ status, clientAddress, peerAddress }))

for (const engine of DIRECT_ENGINES) {
  describe(`the client address in request log lines on ${engine}`, () => {
    const PROXY = '198.51.100.9'
    const CLIENT = '203.0.113.7'
    // Low, so that a few failed authentications from one address end in a 429.
    const FAILED_AUTH = { RATE_LIMIT_FAILED_AUTH_PER_IP: '2' }
    const direct = useTestApp(engine, { env: FAILED_AUTH })
    const behindProxy = useTestApp(engine, { env: { ...FAILED_AUTH, TRUST_PROXY: '198.51.100.0/24' } })
    const turnedOff = useTestApp(engine, { env: { ...FAILED_AUTH, TRUST_PROXY: '198.51.100.0/24', LOG_CLIENT_ADDRESS: 'false' } })

    /** The answers of EVERY_STATUS, each request from `remoteAddress` with `headers`. */
    const everyAnswer = async (fx: TestAppFixture, remoteAddress: string, headers: InjectOptions['headers'] = {}) => {
      const send = (options: InjectOptions, key?: string) =>
        fx.testApp.app.inject({ ...options, remoteAddress, headers: { ...headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) } })
      await send({ method: 'GET', url: '/v1/pets' }, fx.key)
      await send({ method: 'GET', url: '/v1/pets?limit=0' }, fx.key)
      await send({ method: 'GET', url: '/v1/nowhere' }, fx.key)
      await send({ method: 'DELETE', url: '/v1/pets' }, fx.key)
      for (let tries = 0; tries < 5; tries++) {
        if ((await send({ method: 'GET', url: '/v1/pets' }, 'ps_live_not_a_key')).statusCode === 429) break
      }
    }

    it('names the TCP peer as clientAddress in the line of every answer, successes, refusals and 429s alike', async () => {
      const lines = await requestLinesOf(direct.testApp, () => everyAnswer(direct, '192.0.2.10'))
      assert.deepEqual(addressesOf(lines), everyLineNaming('192.0.2.10'))
    })

    it('ignores X-Forwarded-For while TRUST_PROXY is unset: a client cannot name another address', async () => {
      const lines = await requestLinesOf(direct.testApp, () => everyAnswer(direct, '192.0.2.11', { 'x-forwarded-for': CLIENT }))
      assert.deepEqual(addressesOf(lines), everyLineNaming('192.0.2.11'))
    })

    it('names the forwarded address behind a proxy TRUST_PROXY trusts, and the proxy as peerAddress', async () => {
      const lines = await requestLinesOf(behindProxy.testApp, () => everyAnswer(behindProxy, PROXY, { 'x-forwarded-for': CLIENT }))
      assert.deepEqual(addressesOf(lines), everyLineNaming(CLIENT, PROXY))
    })

    it('walks X-Forwarded-For back through trusted proxies only, to the first address no trusted proxy holds', async () => {
      const lines = await requestLinesOf(behindProxy.testApp, () =>
        behindProxy.testApp.request(behindProxy.key, {
          method: 'GET',
          url: '/v1/pets',
          remoteAddress: PROXY,
          headers: { 'x-forwarded-for': '192.0.2.66, 203.0.113.8, 198.51.100.20' },
        }),
      )
      assert.deepEqual(addressesOf(lines), [{ status: 200, clientAddress: '203.0.113.8', peerAddress: PROXY }])
    })

    it('ignores X-Forwarded-For from a peer TRUST_PROXY does not trust', async () => {
      const lines = await requestLinesOf(behindProxy.testApp, () => everyAnswer(behindProxy, '192.0.2.12', { 'x-forwarded-for': '203.0.113.9' }))
      assert.deepEqual(addressesOf(lines), everyLineNaming('192.0.2.12'))
    })

    it('names no address at all with LOG_CLIENT_ADDRESS=false, forwarded or not', async () => {
      const lines = [
        ...(await requestLinesOf(turnedOff.testApp, () => everyAnswer(turnedOff, PROXY, { 'x-forwarded-for': CLIENT }))),
        ...(await requestLinesOf(turnedOff.testApp, () => everyAnswer(turnedOff, '192.0.2.13'))),
      ]
      assert.deepEqual(lines.map((line) => line.status), [...EVERY_STATUS, ...EVERY_STATUS])
      assert.doesNotMatch(JSON.stringify(lines), /clientAddress|peerAddress|198\.51\.100\.9|203\.0\.113\.7|192\.0\.2\.13/)
    })

    it('names the address of a real connection', async () => {
      const { app } = direct.testApp
      const address = await app.listen({ port: 0, host: '127.0.0.1' })
      // The body read whole: the line is written once the answer is.
      const lines = await requestLinesOf(direct.testApp, async () => (await fetch(`${address}/v1/pets`, { headers: { authorization: `Bearer ${direct.key}` } })).text())
      assert.deepEqual(addressesOf(lines), [{ status: 200, clientAddress: '127.0.0.1', peerAddress: undefined }])
    })

    // Answered before Fastify has a request, so no forwarded address is read: behind a proxy the peer is that.
    for (const [fixture, expected] of [
      [() => direct, { clientAddress: '127.0.0.1', peerAddress: undefined }],
      [() => behindProxy, { clientAddress: undefined, peerAddress: '127.0.0.1' }],
      [() => turnedOff, { clientAddress: undefined, peerAddress: undefined }],
    ] as const) {
      it(`names the TCP peer in the lines of answers given before Fastify (417, CONNECT) as ${JSON.stringify(expected)}`, async () => {
        const { testApp } = fixture()
        // The direct app may listen already, from the test above.
        if (!testApp.app.server.listening) await testApp.app.listen({ port: 0, host: '127.0.0.1' })
        const { port } = testApp.app.server.address() as net.AddressInfo
        const lines = await requestLinesOf(testApp, async () => {
          for (const head of ['GET /v1/pets HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n']) {
            const socket = net.connect(port, '127.0.0.1')
            socket.end(head)
            await once(socket.resume(), 'close')
          }
        })
        assert.deepEqual(addressesOf(lines), [
          { status: 417, ...expected },
          { status: 405, ...expected },
        ])
      })
    }
  })
}

/** Until the reader has written something of the log to `file`: it reads. */
async function readerStarted(file: string): Promise<void> {
  while (!fs.existsSync(file) || fs.statSync(file).size === 0) await new Promise((resolve) => setTimeout(resolve, 10))
}

describe('randomRequestId, the generated request id', () => {
  const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

  it('makes version 4 UUIDs, each new, across the refills of its random bytes', () => {
    // 1,000 refills of 128 ids.
    const ids = Array.from({ length: 128_000 }, randomRequestId)
    for (const id of ids) assert.match(id, UUID_V4)
    assert.equal(new Set(ids).size, ids.length)
  })

  it('draws every random digit from all sixteen, in every place', () => {
    const ids = Array.from({ length: 4_000 }, randomRequestId)
    for (let place = 0; place < 36; place++) {
      const seen = new Set(ids.map((id) => id[place]))
      // The dashes, the version's 4, and the variant's 8 to b.
      const expected = [8, 13, 18, 23].includes(place) ? 1 : place === 14 ? 1 : place === 19 ? 4 : 16
      assert.equal(seen.size, expected, `place ${place}: ${[...seen].sort().join('')}`)
    }
  })
})

describe('infoLines, the request line\'s writer', () => {
  // Every kind of string pino escapes its own way (quotes, backslashes, control characters, long strings)
  // or leaves as it is (non-ASCII, emoji, a line separator), a key that must be redacted (plain and
  // percent-encoded), and the numbers and nulls a line holds.
  const KEY = `ps_live_${'a1B2'.repeat(8)}`
  const STRINGS = ['', 'plain', 'say "hi"', 'back\\slash', 'tab\tnew\nline', '\u0000\u001f', 'café 日本', 'a cat 🐈', '\u2028', 'x'.repeat(150), KEY, `/v1/${KEY}`, `%70s_live_${'Z'.repeat(32)}`]
  const VALUES: unknown[] = [...STRINGS, 0, 200, -1, 0.41, 1e21, Number.NaN, null, undefined]
  // What each writes, its time made equal.
  const written = (log: (logger: Logger) => void, level = 'info'): string[] => {
    const lines: string[] = []
    const logger = createLogger({ logLevel: level as 'info' }, { write: (line: string) => lines.push(line) })
    log(logger)
    return lines.map((line) => line.replace(/"time":\d+/, '"time":0'))
  }

  it('writes what logger.info writes, byte for byte, for every value in every place of a line', () => {
    let compared = 0
    for (const value of VALUES) {
      for (const fields of [{ value }, { reqId: 'r', value, status: 200 }, { reqId: value, route: null, durationMs: 1.5 }]) {
        const expected = written((logger) => logger.info(fields, 'request'))
        const actual = written((logger) => infoLines(logger, 'request')(fields))
        assert.equal(actual.length, 1)
        assert.deepEqual(actual, expected, JSON.stringify(fields))
        compared++
      }
    }
    assert.equal(compared, VALUES.length * 3)
    // The key is redacted by the same hook.
    assert.ok(!written((logger) => infoLines(logger, 'request')({ path: `/v1/${KEY}` })).join('').includes(KEY))
  })

  it('writes a lone surrogate escaped, which reads back as what logger.info writes raw', () => {
    for (const value of ['\ud800', 'a\udfffb']) {
      const [expected] = written((logger) => logger.info({ value }, 'request'))
      const [actual] = written((logger) => infoLines(logger, 'request')({ value }))
      assert.ok(actual?.includes('\\ud'), actual)
      assert.deepEqual(JSON.parse(actual ?? ''), JSON.parse(expected ?? ''))
    }
  })

  it('writes nothing at a level above info, as logger.info', () => {
    for (const level of ['warn', 'error', 'silent']) {
      assert.deepEqual(written((logger) => infoLines(logger, 'request')({ status: 200 }), level), [])
      assert.deepEqual(written((logger) => logger.info({ status: 200 }, 'request'), level), [])
    }
    assert.equal(written((logger) => infoLines(logger, 'request')({}), 'debug').length, 1)
  })
})

describe('the log destination', () => {
  // Lines of every UTF-8 width, and longer than one write (sonic-boom writes at most 16 KiB at once).
  const TEXTS = ['plain', 'café', '日本語のペット', 'a cat 🐈 and a dog 🐕', 'x'.repeat(20_000), '"quoted" \\ back\nslash']
  const LINES = 600
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-log-'))
  after(() => fs.rmSync(dir, { recursive: true, force: true }))
  // The whole lines written so far (the last may be on its way).
  const linesIn = (file: string) =>
    fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).map((line) => JSON.parse(line) as { i: number; msg: string }) : []

  // The lines of a turn are written as it ends, from the main thread; those logged before the file is open,
  // or while earlier ones wait in sonic-boom (a pipe full until its reader comes), are written by it in the
  // background: the order holds across both.
  const destinations = {
    'to a file, once it is open': async (name: string) => {
      const file = path.join(dir, `${name}.log`)
      const stream = asyncDestination(file)
      await once(stream, 'ready')
      return { stream, file, reading: () => {} }
    },
    'to a file, before it is open': async (name: string) => {
      const file = path.join(dir, `${name}.log`)
      return { stream: asyncDestination(file), file, reading: () => {} }
    },
    // A FIFO opened non-blocking, as Node opens a pipe given as stdout, whose reader (cat) starts only once
    // every line is logged: the pipe fills at 64 KiB, and the rest waits.
    'to a pipe whose reader comes late': async (name: string) => {
      const fifo = path.join(dir, `${name}.fifo`)
      const file = path.join(dir, `${name}.log`)
      execFileSync('mkfifo', [fifo])
      const placeholder = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
      const writeEnd = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)
      const stream = asyncDestination(writeEnd)
      return {
        stream,
        file,
        reading: () => {
          const output = fs.openSync(file, 'w')
          spawn('cat', [fifo], { stdio: ['ignore', output, 'inherit'] })
          // The placeholder stays open: closed before cat has opened the FIFO, it would leave a moment without
          // a reader, in which a write fails with EPIPE.
          after(() => {
            fs.closeSync(placeholder)
            fs.closeSync(writeEnd)
            fs.closeSync(output)
          })
        },
      }
    },
  } as const
  for (const [to, open] of Object.entries(destinations)) {
    for (const [how, finish] of [
      ['written in the background', async (file: string) => {
        while (linesIn(file).length < LINES) await new Promise((resolve) => setTimeout(resolve, 10))
      }],
      // As a process exits (src/process/server.ts): its last words, then flushLog, then the exit's flushSync.
      // flushSync alone writes what is buffered at once, while the write in flight finishes on its own and
      // may land after it.
      ['flushed as at exit', async (file: string, stream: ReturnType<typeof asyncDestination>, logger: Logger) => {
        await flushLog(logger)
        stream.flushSync()
        while (linesIn(file).length < LINES) await new Promise((resolve) => setTimeout(resolve, 10))
      }],
    ] as const) {
      it(`writes every line whole and in order, whatever its characters, ${to}, ${how}`, async () => {
        const { stream, file, reading } = await open(`${to} ${how}`)
        const logger = createLogger({ logLevel: 'info' }, stream)
        const sent: string[] = []
        // Bursts of a hundred lines, each in a turn of its own; the pipe's reader starts halfway, while
        // sonic-boom still holds what the full pipe refused.
        for (let i = 0; i < LINES; i++) {
          const text = `${i} ${TEXTS[i % TEXTS.length] ?? ''}`
          sent.push(text)
          logger.info({ i }, text)
          if (i % 100 === 99) await new Promise((resolve) => setImmediate(resolve))
          if (i === LINES / 2) reading()
        }
        // Lines in the file already: for the pipe, cat reading, since cat's start, which a loaded machine can make
        // last over a second, is no pause of a reader.
        await readerStarted(file)
        await finish(file, stream, logger)
        const lines = linesIn(file)
        assert.deepEqual(lines.map((line) => line.msg), sent)
        assert.deepEqual(lines.map((line) => line.i), sent.map((_, i) => i))
      })
    }
  }
})

describe('a flush at exit, whatever became of the log reader', () => {
  // A FIFO stands for stdout piped to a log reader (`| head`, `| logger`), opened non-blocking as Node
  // opens a pipe it was given.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-log-reader-'))
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  for (const reader of ['gone (EPIPE)', 'alive but not reading (a full pipe)'] as const) {
    it(`returns within a second or so when the reader is ${reader}, dropping what it cannot write`, async () => {
      const fifo = path.join(dir, reader.split(' ')[0] ?? '')
      execFileSync('mkfifo', [fifo])
      const readEnd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
      const writeEnd = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)
      try {
        const stream = asyncDestination(writeEnd)
        const logger = createLogger({ logLevel: 'info' }, stream)
        if (reader === 'gone (EPIPE)') fs.closeSync(readEnd)
        // More than a pipe holds (64 KiB on Linux), logged just before the exit's flush, as a last line is.
        for (let i = 0; i < 200; i++) logger.info({ i }, 'x'.repeat(1_000))
        const started = performance.now()
        // As a process exits: flushLog after its last words, then the exit's own flush.
        await flushLog(logger)
        stream.flushSync()
        const took = performance.now() - started
        // FLUSH_SYNC_MS once, not twice: once flushLog has waited for it, the exit's flush gives up at once.
        assert.ok(took < 1_800, `the flushes took ${Math.round(took)} ms`)
      } finally {
        if (reader !== 'gone (EPIPE)') fs.closeSync(readEnd)
      }
    })
  }

  // A reader starved of a core: it takes 16 KiB every 200 ms, so the flush lasts past FLUSH_SYNC_MS, though the
  // reader never stops for as long. It starts before the flushes, or after a first flush (the stop's first line's)
  // found it taking nothing and gave up on it.
  const SLOW_READER = `const fs = require('node:fs')
const [input, output] = [fs.openSync(process.argv[1], 'r'), fs.openSync(process.argv[2], 'w')]
const chunk = Buffer.alloc(16384)
const read = () => {
  const n = fs.readSync(input, chunk)
  if (n === 0) return
  fs.writeSync(output, chunk.subarray(0, n))
  setTimeout(read, 200)
}
read()`
  for (const comes of ['before the flushes', 'after a flush gave up on it'] as const) {
    it(`writes every line at exit to a reader that reads slowly, coming ${comes}`, async () => {
      const fifo = path.join(dir, `slow ${comes}`)
      const file = `${fifo}.log`
      execFileSync('mkfifo', [fifo])
      const placeholder = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
      const stream = asyncDestination(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK))
      const logger = createLogger({ logLevel: 'info' }, stream)
      // Three pipes' worth: what the reader takes in about three seconds.
      for (let i = 0; i < 200; i++) logger.info({ i }, 'x'.repeat(1_000))
      await new Promise((resolve) => setImmediate(resolve))
      if (comes === 'after a flush gave up on it') await flushLog(logger)
      // The placeholder stays open until the reader ends, so that no write meets a FIFO without a reader (EPIPE).
      const reader = spawn(process.execPath, ['-e', SLOW_READER, fifo, file], { stdio: 'inherit' })
      const exited = once(reader, 'exit')
      // Reading already: Node's start, which a loaded machine can make last over a second, is no pause of a reader.
      await readerStarted(file)
      // As a process exits: flushLog after its last words, then the exit's own flush; then its descriptors close.
      await flushLog(logger)
      stream.flushSync()
      stream.destroy()
      await exited
      fs.closeSync(placeholder)
      const lines = fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).map((line) => (JSON.parse(line) as { i: number }).i)
      assert.deepEqual(lines, Array.from({ length: 200 }, (_, i) => i))
    })
  }
})
