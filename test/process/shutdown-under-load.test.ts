import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import { after, describe, it } from 'node:test'
import { DIRECT_ENGINES, type Engine, createTestDatabase } from '../helper.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir, within } from '../processes.js'

// SIGTERM to a real server while keep-alive clients keep it busy, as one process and as --workers 2:
// every request that reaches the server, before the signal or during the drain, is answered in full;
// no connection is reset; a request after the server stopped listening is refused before it is sent
// (ECONNREFUSED); every 201 is kept, and the process exits 0.

after(cleanupProcesses)

const drops: (() => Promise<void>)[] = []
after(async () => {
  for (const drop of drops) await drop()
})

const CLIENTS = 40
const SIGNAL_AFTER_ANSWERS = 400
const QUEUED = 20
const STATUSES = ['available', 'pending', 'sold', undefined] as const
/** One process, and a primary whose workers share its listening socket. */
const SHAPES: [string, string[]][] = [
  ['one process', []],
  ['--workers 2', ['--workers', '2']],
]

/** One request and what became of it. Times are performance.now() of this process. */
interface Exchange {
  client: number
  kind: 'create' | 'idempotent create' | 'list'
  /** The create's unique name, which tells its stored pet apart. */
  name: string
  /** When the last byte of the request was handed to the kernel. */
  sentAt?: number
  answeredAt?: number
  status?: number
  body?: string
  /** The whole response arrived: as many body bytes as Content-Length said. */
  complete?: boolean
  error?: string
  /** The request went out on a connection an earlier answer had kept alive. */
  reused?: boolean
}

const KINDS = ['create', 'idempotent create', 'list'] as const

/** Sends one create, create with Idempotency-Key or list on `agent`'s connection; resolves, never rejects, with what happened. */
function exchange(agent: http.Agent, port: number, key: string, client: number, n: number): Promise<Exchange> {
  const kind = KINDS[n % KINDS.length] ?? 'list'
  const name = `load ${client}.${n}`
  const status = STATUSES[n % STATUSES.length]
  const record: Exchange = { client, kind, name }
  const body = kind !== 'list' ? JSON.stringify({ name, categoryId: 1 + n, ...(status === undefined ? {} : { status }) }) : ''
  return new Promise((resolve) => {
    const finish = (fields: Partial<Exchange>) => resolve(Object.assign(record, { answeredAt: performance.now(), ...fields }))
    const request = http.request({
      agent,
      host: '127.0.0.1',
      port,
      method: kind === 'list' ? 'GET' : 'POST',
      path: kind === 'list' ? '/v1/pets?limit=5' : '/v1/pets',
      headers: {
        authorization: `Bearer ${key}`,
        ...(kind === 'list' ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }),
        ...(kind === 'idempotent create' ? { 'idempotency-key': `load-${client}-${n}` } : {}),
      },
    })
    request.on('socket', () => (record.reused = request.reusedSocket))
    request.on('finish', () => (record.sentAt = performance.now()))
    request.on('response', (response) => {
      let text = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
      response.on('end', () =>
        finish({
          status: response.statusCode,
          body: text,
          complete: response.complete && Buffer.byteLength(text) === Number(response.headers['content-length']),
        }),
      )
      response.on('error', (error: NodeJS.ErrnoException) => finish({ status: response.statusCode, error: error.code ?? error.message }))
    })
    request.on('error', (error: NodeJS.ErrnoException) => finish({ error: error.code ?? error.message }))
    request.setTimeout(15_000, () => request.destroy(new Error('no answer within 15 s')))
    request.end(body)
  })
}

async function freshDatabase(engine: Engine): Promise<{ dir: string; env: Record<string, string> }> {
  const dir = trackedTempDir('petstore-shutdown-load-')
  const database = await createTestDatabase(engine, dir)
  drops.push(database.drop)
  // 40 clients with one key go far past the per-key limit in a second.
  return { dir, env: { ...database.env, RATE_LIMIT_PER_KEY: '0', SHUTDOWN_TIMEOUT_MS: '10000' } }
}

async function createKey(env: Record<string, string>, dir: string): Promise<string> {
  const created = await runCli(['keys', 'create', '--name', 'load'], env, dir, { rejectOnFailure: true })
  return created.stdout.trim().split('\n').at(-1) ?? ''
}

async function getText(server: ServerProcess, key: string, url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${server.baseUrl}${url}`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(5_000),
  })
  return { status: response.status, body: await response.text() }
}

/**
 * Restarts the server on the same database and asserts that it holds exactly the acknowledged
 * pets, as they were answered: none lost, none altered, none stored without its 201.
 */
async function assertStoredExactly(env: Record<string, string>, dir: string, key: string, acknowledged: Map<number, string>): Promise<void> {
  const restarted = await startServer(env, dir)
  try {
    // listPets has no cursor, so every pet is read by id; ids are assigned in sequence from 1.
    const stored = new Map<number, string>()
    const lastId = Math.max(0, ...acknowledged.keys()) + CLIENTS * 2
    let next = 0
    const read = async (): Promise<void> => {
      while (next < lastId) {
        const id = ++next
        const fetched = await getText(restarted, key, `/v1/pets/${id}`)
        if (fetched.status === 200) stored.set(id, fetched.body)
        else assert.equal(fetched.status, 404, fetched.body)
      }
    }
    await Promise.all(Array.from({ length: 20 }, read))
    for (const [id, body] of acknowledged) assert.equal(stored.get(id), body, `pet ${id} was not kept as its 201 said`)
    // A stored pet whose request failed would be a 201 the client never received.
    const unanswered = [...stored].filter(([id]) => !acknowledged.has(id)).map(([, body]) => body)
    assert.deepEqual(unanswered, [], 'pets were stored for requests that got no 201')
  } finally {
    assert.deepEqual(await stopServer(restarted), { code: 0, signal: null }, restarted.output())
  }
}

/**
 * Connects, sends a whole createPet (Connection: close) and resolves once every byte is with the
 * kernel; `answer` then resolves with all the server sent, or the connection error.
 */
async function sendCreate(port: number, key: string, name: string): Promise<{ name: string; answer: Promise<string> }> {
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let received = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk))
  const answer = new Promise<string>((resolve) => {
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(`connection error ${error.code ?? error.message}`))
    socket.on('close', () => resolve(received))
  })
  const body = JSON.stringify({ name, categoryId: 1 })
  await new Promise<void>((resolve, reject) =>
    socket.write(
      'POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
        `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
      (error) => (error ? reject(error) : resolve()),
    ),
  )
  return { name, answer }
}

for (const engine of DIRECT_ENGINES) {
  describe(`SIGTERM under load on ${engine}`, () => {
    for (const [shape, args] of SHAPES) {
      const name =
        `answers every request that reaches it, before SIGTERM or during the drain, in full, resets no connection, ` +
        `keeps every 201 and exits 0 (${CLIENTS} keep-alive clients, ${shape})`
      it(name, { timeout: 120_000 }, async (context) => {
        const { dir, env } = await freshDatabase(engine)
        const key = await createKey(env, dir)
        // At info, so that the log below has a line per request.
        const server = await startServer({ ...env, LOG_LEVEL: 'info' }, dir, args)

        const exchanges: Exchange[] = []
        let answered = 0
        // The signal waits until every client's connection has been served once: a connection the
        // server has not accepted yet is the case of the next test, made there on purpose.
        const served = new Set<number>()
        const started = performance.now()
        let signalAt: number | undefined
        let exited = false
        void server.exited.then(() => (exited = true))

        // Each client goes on sending after the signal, as a client that knows nothing of it would,
        // until the server refuses its connection or has exited.
        const client = async (i: number): Promise<void> => {
          const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
          try {
            for (let n = 0; !exited; n++) {
              const done = await exchange(agent, server.port, key, i, n)
              exchanges.push(done)
              if (done.error === undefined) {
                answered++
                served.add(i)
              }
              const loaded = answered >= SIGNAL_AFTER_ANSWERS && served.size === CLIENTS
              // A client that never gets through must not hold the signal back forever; the checks below name it.
              if ((loaded || performance.now() - started > 30_000) && signalAt === undefined) {
                signalAt = performance.now()
                server.child.kill('SIGTERM')
              }
              if (done.error !== undefined && signalAt !== undefined) break
            }
          } finally {
            agent.destroy()
          }
        }
        await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
        const exit = await within(server.exited, 20_000, () => `the server did not exit:\n${server.output()}`)
        const exitedAt = performance.now()

        assert.ok(signalAt !== undefined, 'the signal was never sent')
        const signal = signalAt
        const sentBefore = exchanges.filter((e) => e.sentAt !== undefined && e.sentAt < signal)
        const inFlight = sentBefore.filter((e) => (e.answeredAt ?? Infinity) > signal)
        const duringDrain = exchanges.filter((e) => e.sentAt !== undefined && e.sentAt >= signal && e.error === undefined)
        const refused = exchanges.filter((e) => e.error === 'ECONNREFUSED')
        context.diagnostic(
          `${exchanges.length} requests: ${sentBefore.length} sent before SIGTERM (${inFlight.length} of them in flight), ` +
            `${duringDrain.length} answered after it, ${refused.length} refused; exited ${Math.round(exitedAt - signal)} ms after the signal`,
        )

        const explain = (e: Exchange): string =>
          `${e.kind} ${e.name} sent ${e.sentAt === undefined ? 'never' : `${(e.sentAt - signal).toFixed(1)} ms`} from the signal` +
          ` on a ${e.reused === true ? 'kept-alive' : 'new'} connection: ${e.status ?? ''} ${e.error ?? ''} ${e.complete === false ? '(truncated)' : ''}`
        // A refused connection carried nothing: its client knows that its request was not carried out.
        // Anything else that is not a whole answer (a reset, a hang-up, a truncated body) leaves it guessing.
        assert.deepEqual(
          exchanges.filter((e) => e.error !== 'ECONNREFUSED' && (e.error !== undefined || e.complete !== true)).map(explain),
          [],
          `requests were not answered in full; the server wrote:\n${server.output()}`,
        )
        assert.deepEqual(
          refused.filter((e) => e.answeredAt !== undefined && e.answeredAt < signal).map(explain),
          [],
          'connections were refused before the signal',
        )
        assert.deepEqual(
          exchanges.filter((e) => e.status !== undefined && e.status !== (e.kind === 'list' ? 200 : 201)).map(explain),
          [],
          'requests were answered with something else than success',
        )
        assert.ok(inFlight.length > 0, 'no request was in flight at the signal: the test proved nothing')
        assert.ok(duringDrain.length > 0, 'no request was sent during the drain: the test proved nothing')
        assert.deepEqual(exit, { code: 0, signal: null }, server.output())
        // The log, written asynchronously to a pipe, is flushed before the exit: one line per answer, each whole,
        // and the process's last words after them.
        const lines = server
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { msg?: string; route?: string })
        assert.equal(
          lines.filter((line) => line.msg === 'request' && line.route === '/v1/pets').length,
          exchanges.filter((e) => e.status !== undefined).length,
          'request lines in the log against answers received',
        )
        assert.equal(lines.at(-1)?.msg, args.length === 0 ? 'shut down cleanly' : 'all workers stopped')

        const acknowledged = new Map(
          exchanges
            .filter((e) => e.kind !== 'list' && e.status === 201 && e.body !== undefined)
            .map((e): [number, string] => [(JSON.parse(e.body ?? '') as { id: number }).id, e.body ?? '']),
        )
        await assertStoredExactly(env, dir, key, acknowledged)
      })
    }

    it(`answers requests already waiting in the accept backlog at SIGTERM instead of resetting them (${QUEUED} requests)`, { timeout: 30_000 }, async () => {
      const { dir, env } = await freshDatabase(engine)
      const key = await createKey(env, dir)
      const server = await startServer(env, dir)
      // A server too busy to accept for a moment, made certain by stopping it: the kernel completes
      // the handshakes and queues the connections, each with its whole request, in the backlog.
      server.child.kill('SIGSTOP')
      let queued: { name: string; answer: Promise<string> }[]
      try {
        queued = await Promise.all(Array.from({ length: QUEUED }, (_, i) => sendCreate(server.port, key, `queued ${i}`)))
      } finally {
        server.child.kill('SIGTERM')
        server.child.kill('SIGCONT')
      }
      const answers = await Promise.all(queued.map(async ({ name, answer }) => ({ name, text: await answer })))
      const exit = await within(server.exited, 15_000, () => `the server did not exit:\n${server.output()}`)

      const unanswered = answers.filter(({ text }) => !text.startsWith('HTTP/1.1 201 ')).map(({ name, text }) => `${name}: ${text.slice(0, 80)}`)
      assert.deepEqual(unanswered, [], `requests sent before the signal got no 201 (${unanswered.length} of ${QUEUED})`)
      assert.deepEqual(exit, { code: 0, signal: null }, server.output())
      const acknowledged = new Map(
        answers.map(({ text }): [number, string] => {
          const body = text.slice(text.indexOf('\r\n\r\n') + 4)
          return [(JSON.parse(body) as { id: number }).id, body]
        }),
      )
      await assertStoredExactly(env, dir, key, acknowledged)
    })
  })
}
