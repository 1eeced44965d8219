import assert from 'node:assert/strict'
import { once } from 'node:events'
import { type ServerResponse, createServer } from 'node:http'
import net from 'node:net'
import { afterEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { type ConnectionDrain, followConnections } from '../../src/process/drain.js'
import { clientErrorHandler, createHttpServer } from '../../src/http/http-protocol.js'
import { within } from '../processes.js'

// Shutdown meets each state a connection can be in, on the service's own Node server with its
// lingering close: idle after an answer, an answer in progress (headers unsent, or sent and the body
// still coming), a request arrived but unread, pipelined requests. Each connection must end with
// its answers delivered and then a clean close (a FIN), never a reset; a request is left unanswered
// only behind an answer that said Connection: close. The answers are held by the test, so that each
// state lasts as long as it needs.

/** Longer than a quiet time and a few 25 ms looks, for "it was not closed meanwhile". */
const A_WHILE_MS = 250

interface Answer {
  status: number
  /** Lower-case names. */
  headers: Record<string, string>
  body: string
}

/** The answers in `raw`, framed by Content-Length or chunked, and whatever follows the last whole one. */
function parseAnswers(raw: string): { answers: Answer[]; rest: string } {
  const answers: Answer[] = []
  let rest = raw
  for (;;) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) return { answers, rest }
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n')
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
    let after = rest.slice(end + 4)
    let body: string
    if (headers['transfer-encoding'] === 'chunked') {
      const last = after.indexOf('0\r\n\r\n')
      if (last === -1) return { answers, rest }
      body = after.slice(0, last).replace(/(^|\r\n)[0-9a-f]+\r\n/g, '').replace(/\r\n$/, '')
      after = after.slice(last + 5)
    } else {
      const length = Number(headers['content-length'] ?? 0)
      if (after.length < length) return { answers, rest }
      body = after.slice(0, length)
      after = after.slice(length)
    }
    answers.push({ status: Number(statusLine.split(' ')[1]), headers, body })
    rest = after
  }
}

/** A client connection that records what it receives and how it ended. */
interface Client {
  socket: net.Socket
  received: () => string
  /** Resolves when the connection is closed: 'fin' for a clean close, else the error's code. */
  ended: Promise<string>
  isEnded: () => boolean
}

async function connect(port: number): Promise<Client> {
  const socket = net.connect(port, '127.0.0.1')
  let received = ''
  let end: string | undefined
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk))
  const ended = new Promise<string>((resolve) => {
    socket.on('error', (error: NodeJS.ErrnoException) => resolve((end ??= error.code ?? error.message)))
    socket.on('end', () => resolve((end ??= 'fin')))
    socket.on('close', () => resolve((end ??= 'closed')))
  })
  await once(socket, 'connect')
  return { socket, received: () => received, ended, isEnded: () => end !== undefined }
}

/** Writes `bytes` and resolves once they are with the kernel: on this machine, in the server's receive buffer. */
function send(client: Client, bytes: string): Promise<void> {
  return new Promise((resolve, reject) => client.socket.write(bytes, (error) => (error ? reject(error) : resolve())))
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: drain\r\n\r\n`

/** Keeps the event loop from reading: whatever arrives meanwhile waits in the kernel, unread, as on a busy server. */
function block(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until);
}

/** Waits until `condition` holds, looking every few milliseconds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (condition()) return
    await sleep(5)
  }
  assert.fail(`gave up waiting until ${what}`)
}

interface TestServer {
  port: number
  drain: ConnectionDrain
  /** The path of every request that has reached the handler, in order. */
  requests: string[]
  /** The held requests that have reached the handler, by path. */
  held: Map<string, ServerResponse>
  /** Answers the held request for `path`: 200 with its path as the body. */
  release: (path: string) => void
  /** The connections the server accepted. */
  accepted: () => number
  /** Closes whatever a failed test left open. */
  close: () => void
}

const servers: TestServer[] = []
const clients: Client[] = []
afterEach(() => {
  for (const client of clients.splice(0)) client.socket.destroy()
  for (const server of servers.splice(0)) server.close()
})

/** The service's limits, which no test here reaches unless it sets shorter ones. */
const TIMEOUTS = { requestMs: 10_000, headersMs: 5_000, keepAliveMs: 10_000 }

/**
 * The service's Node server (createHttpServer) followed by the drain, with a handler that answers
 * `/now` at once, holds `/hold/…` until released, and for `/stream/…` sends its headers and a first
 * chunk, holding the rest until released. Client errors are answered as Fastify has the service answer them.
 */
async function startServer(timeouts = TIMEOUTS): Promise<TestServer> {
  const held = new Map<string, ServerResponse>()
  const requests: string[] = []
  let accepted = 0
  const server = createHttpServer(
    (request, response) => {
      const path = request.url ?? ''
      requests.push(path)
      if (path === '/now') {
        response.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(path.length) }).end(path)
        return
      }
      if (path.startsWith('/stream/')) response.writeHead(200, { 'content-type': 'text/plain' }).write('first ')
      held.set(path, response)
    },
    { timeouts, addresses: { log: true, behindProxy: false } },
    pino({ level: 'silent' }),
  )
  server.on('clientError', clientErrorHandler)
  server.on('connection', () => accepted++)
  const drain = followConnections(server)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const release = (path: string): void => {
    const response = held.get(path)
    assert.ok(response !== undefined, `${path} is not held`)
    if (response.headersSent) response.end(path)
    else response.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(path.length) }).end(path)
  }
  const close = (): void => {
    server.closeAllConnections()
    if (server.listening) server.close()
  }
  const started: TestServer = { port: (server.address() as net.AddressInfo).port, drain, requests, held, release, accepted: () => accepted, close }
  servers.push(started)
  return started
}

async function client(server: TestServer): Promise<Client> {
  const connected = await connect(server.port)
  clients.push(connected)
  return connected
}

/** The answers of `client` once its connection has ended, which must have been a clean close with nothing left over. */
async function answersAtClose(client: Client): Promise<Answer[]> {
  const end = await client.ended
  const { answers, rest } = parseAnswers(client.received())
  assert.equal(end, 'fin', `the connection ended with ${end} instead of a clean close, after ${JSON.stringify(client.received())}`)
  assert.equal(rest, '', 'an answer was cut short')
  return answers
}

/**
 * Body, status and Connection header of each answer: what the client learns about its connection.
 * No Connection header on HTTP/1.1 means the same as keep-alive (RFC 9112 §9.3).
 */
const summary = (answers: Answer[]) => answers.map(({ body, status, headers }) => `${body} ${status} ${headers.connection ?? 'keep-alive'}`)

describe('closing connections at shutdown', () => {
  it('closes a connection idle after its answer cleanly once it has been quiet', async () => {
    const server = await startServer()
    const idle = await client(server)
    await send(idle, get('/now'))
    await until(() => parseAnswers(idle.received()).answers.length === 1, 'the answer arrived')
    await server.drain.closeConnections(50)
    assert.deepEqual(summary(await answersAtClose(idle)), ['/now 200 keep-alive'])
  })

  it('closes a connection that never sent a request cleanly once it has been quiet', async () => {
    const server = await startServer()
    const silent = await client(server)
    await until(() => server.accepted() === 1, 'the server accepted the connection')
    await server.drain.closeConnections(50)
    assert.deepEqual(await answersAtClose(silent), [])
  })

  it('keeps a connection open while its answer is in progress, which then says Connection: close', async () => {
    const server = await startServer()
    const busy = await client(server)
    await send(busy, get('/hold/b'))
    await until(() => server.held.has('/hold/b'), 'the request reached the handler')
    const closed = server.drain.closeConnections(0)
    await sleep(A_WHILE_MS)
    assert.equal(busy.isEnded(), false, 'the connection was closed with its answer in progress')
    server.release('/hold/b')
    assert.deepEqual(summary(await answersAtClose(busy)), ['/hold/b 200 close'])
    await closed
  })

  it('keeps a connection open while an answer whose headers are sent is still coming, then closes it once quiet', async () => {
    const server = await startServer()
    const streaming = await client(server)
    await send(streaming, get('/stream/s'))
    await until(() => streaming.received().includes('first'), 'the first chunk arrived')
    const closed = server.drain.closeConnections(0)
    await sleep(A_WHILE_MS)
    assert.equal(streaming.isEnded(), false, 'the connection was closed with its answer in progress')
    server.release('/stream/s')
    // Its headers said keep-alive before shutdown began: the connection is closed once quiet instead.
    assert.deepEqual(summary(await answersAtClose(streaming)), ['first /stream/s 200 keep-alive'])
    await closed
  })

  it('reads a request that arrived unread on a kept-alive connection as shutdown began, and answers it with Connection: close', async () => {
    const server = await startServer()
    const keptAlive = await client(server)
    await send(keptAlive, get('/now'))
    await until(() => parseAnswers(keptAlive.received()).answers.length === 1, 'the first answer arrived')
    await send(keptAlive, get('/now'))
    const closed = server.drain.closeConnections(0)
    // Past the quiet time and the next look before the server reads the request.
    block(60)
    assert.deepEqual(summary(await answersAtClose(keptAlive)), ['/now 200 keep-alive', '/now 200 close'])
    await closed
  })

  it('reads the first request of a new connection that arrived unread as shutdown began, and answers it with Connection: close', async () => {
    const server = await startServer()
    const fresh = await client(server)
    await until(() => server.accepted() === 1, 'the server accepted the connection')
    await send(fresh, get('/now'))
    const closed = server.drain.closeConnections(0)
    block(60)
    assert.deepEqual(summary(await answersAtClose(fresh)), ['/now 200 close'])
    await closed
  })

  it('answers every pipelined request in flight at shutdown, in order, only the last with Connection: close', async () => {
    const server = await startServer()
    const pipelining = await client(server)
    await send(pipelining, get('/hold/1') + get('/hold/2') + get('/hold/3'))
    await until(() => server.held.size === 3, 'the three requests reached the handler')
    const closed = server.drain.closeConnections(0)
    await sleep(A_WHILE_MS)
    assert.equal(pipelining.isEnded(), false, 'the connection was closed with answers in progress')
    // The later answers are ready first: Node still sends them in order.
    for (const path of ['/hold/3', '/hold/2', '/hold/1']) server.release(path)
    assert.deepEqual(summary(await answersAtClose(pipelining)), ['/hold/1 200 keep-alive', '/hold/2 200 keep-alive', '/hold/3 200 close'])
    await closed
  })

  it('answers pipelined requests that arrive during shutdown behind an answer in progress, only the last with Connection: close', async () => {
    const server = await startServer()
    const pipelining = await client(server)
    await send(pipelining, get('/hold/first'))
    await until(() => server.held.has('/hold/first'), 'the first request reached the handler')
    const closed = server.drain.closeConnections(0)
    await send(pipelining, get('/hold/second') + get('/hold/third'))
    await until(() => server.held.has('/hold/third'), 'the last request reached the handler')
    server.release('/hold/first')
    await sleep(A_WHILE_MS)
    assert.equal(pipelining.isEnded(), false, 'the connection was closed with answers in progress')
    server.release('/hold/third')
    server.release('/hold/second')
    assert.deepEqual(summary(await answersAtClose(pipelining)), ['/hold/first 200 keep-alive', '/hold/second 200 keep-alive', '/hold/third 200 close'])
    await closed
  })

  it('closes cleanly after an answer made with Connection: close before the next pipelined request arrived', async () => {
    const server = await startServer()
    const pipelining = await client(server)
    await send(pipelining, get('/hold/first'))
    await until(() => server.held.has('/hold/first'), 'the first request reached the handler')
    const closed = server.drain.closeConnections(0)
    // Answered at once, while it waits behind the first: the latest answer then, it says Connection: close.
    await send(pipelining, get('/now'))
    await until(() => server.requests.includes('/now'), 'the second request was answered')
    await send(pipelining, get('/hold/late'))
    await until(() => server.held.has('/hold/late'), 'the late request reached the handler')
    server.release('/hold/first')
    // HTTP lets a server close after Connection: close with pipelined requests unanswered: the client
    // retries them, and pipelines only idempotent requests (RFC 9112 §9.3.2). What matters is a clean close.
    assert.deepEqual(summary(await answersAtClose(pipelining)), ['/hold/first 200 keep-alive', '/now 200 close'])
    await closed
  })

  it('says Connection: close on an answer given at once to a request that arrives during shutdown', async () => {
    const server = await startServer()
    const keptAlive = await client(server)
    await send(keptAlive, get('/hold/a'))
    await until(() => server.held.has('/hold/a'), 'the request reached the handler')
    server.release('/hold/a')
    await until(() => parseAnswers(keptAlive.received()).answers.length === 1, 'the first answer arrived')
    // A quiet time long enough that only the answer can close the connection.
    const closed = server.drain.closeConnections(60_000)
    await send(keptAlive, get('/now'))
    assert.deepEqual(summary(await answersAtClose(keptAlive)), ['/hold/a 200 keep-alive', '/now 200 close'])
    await closed
  })

  it('keeps following a connection with an answer in progress after many others have come and gone', async () => {
    const server = await startServer()
    const busy = await client(server)
    await send(busy, get('/hold/kept'))
    await until(() => server.held.has('/hold/kept'), 'the request reached the handler')
    // Enough closed connections that the list of connections is pruned more than once.
    for (let i = 0; i < 300; i++) {
      const passing = await client(server)
      await send(passing, get('/now'))
      passing.socket.end()
      await passing.ended
    }
    const closed = server.drain.closeConnections(0)
    await sleep(A_WHILE_MS)
    assert.equal(busy.isEnded(), false, 'the connection was closed with its answer in progress')
    server.release('/hold/kept')
    assert.deepEqual(summary(await answersAtClose(busy)), ['/hold/kept 200 close'])
    await closed
  })

  it('answers a request whose headers were part-sent as shutdown began, once they are finished, with Connection: close', async () => {
    const server = await startServer()
    const halfway = await client(server)
    await send(halfway, 'GET /now HTTP/1.1\r\nHo')
    const closed = server.drain.closeConnections(50)
    await sleep(A_WHILE_MS)
    assert.equal(halfway.isEnded(), false, 'the connection was closed part-way through its headers')
    await send(halfway, 'st: drain\r\n\r\n')
    assert.deepEqual(summary(await answersAtClose(halfway)), ['/now 200 close'])
    await closed
  })

  it('answers 408 in the service\'s error shape to headers never finished after shutdown began, within the headers timeout', async () => {
    const headersMs = 1_000
    const server = await startServer({ ...TIMEOUTS, headersMs })
    const halfway = await client(server)
    const sentAt = performance.now()
    await send(halfway, 'GET /now HTTP/1.1\r\nHo')
    const closed = server.drain.closeConnections(50)
    // Node looks for expired headers every 500 ms (createHttpServer's connectionsCheckingInterval).
    const [answer, ...more] = await within(answersAtClose(halfway), headersMs + 2_000, () => 'the connection was not answered in time')
    assert.deepEqual(more, [])
    assert.equal(answer?.status, 408, halfway.received())
    assert.equal(answer.headers.connection, 'close')
    assert.deepEqual(JSON.parse(answer.body), { code: 'request_timeout', message: 'The request took too long to arrive.', status: 408 })
    assert.ok(performance.now() - sentAt >= headersMs, 'answered before the headers timeout')
    await closed
  })

  it('refuses to follow a server that does not record the answer each connection is on', () => {
    assert.throws(() => followConnections(createServer()), /createHttpServer/)
  })
})
