import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import https from 'node:https'
import tls from 'node:tls'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { DOCUMENTED, KINDS, type Kind } from '../../scripts/fleet.js'
import { createKey, errorShape, stopProcess, waitUntilReady } from '../../scripts/petstore-process.js'
import { makeCertificate, opensslSkip } from '../certificates.js'
import { sqliteDatabaseEnv } from '../helper.js'
import { type ServerProcess, cleanupProcesses, freePort, startServer, stopServer, trackedTempDir } from '../processes.js'
import { type Answer, type Nginx, nginxSkip, requestThroughNginx, startNginx } from './nginx.js'

/*
 * The repository's nginx configuration (ops/nginx/petstore.conf), run by Debian's nginx in front of two
 * `petstore serve` instances on one SQLite database (issue 31). Under keep-alive load through nginx, the
 * instances are restarted one after the other, 1 s apart, twice over: nginx must never answer for them
 * (no 502 or 504, no HTML), and every pet acknowledged must be kept, once. Then what nginx passes on and
 * what it answers itself: the service's 413, client addresses, and nginx's own errors in the error shape.
 */

after(cleanupProcesses)

const SKIP = nginxSkip === false ? opensslSkip : `${nginxSkip}: the reverse-proxy test is skipped`

/** Concurrent keep-alive clients of nginx. */
const LOOPS = 8
const ROUNDS = 2
/** RATE_LIMIT_FAILED_AUTH_PER_IP of the instances: low, so that an address is limited after a few requests. */
const FAILED_AUTH_LIMIT = 3

describe('nginx in front of two instances, with ops/nginx/petstore.conf', { skip: SKIP, timeout: 120_000 }, () => {
  const dir = trackedTempDir('petstore-nginx-')
  let nginx: Nginx | undefined
  let instances: ServerProcess[] = []
  let env: Record<string, string> = {}
  let ca: Buffer[] = []
  let apiKey = ''
  let publicBase = ''

  /** One request to nginx, over HTTPS trusting the test's certificate. */
  const send = (method: string, url: string, options?: Parameters<typeof requestThroughNginx>[4]) => requestThroughNginx(nginx?.port, ca, method, url, options)


  const authorized = (headers: Record<string, string> = {}): Record<string, string> => ({ authorization: `Bearer ${apiKey}`, ...headers })
  const createBody = (name: string) => JSON.stringify({ name, categoryId: 1 })

  /** What is wrong with an answer, whatever its status: not JSON (nginx's HTML pages), or an error out of shape. */
  function misshapen(answer: Answer): string | undefined {
    if (!/^application\/json\b/.test(answer.headers['content-type'] ?? '')) return `Content-Type ${answer.headers['content-type']}: ${answer.text.slice(0, 200)}`
    return answer.status >= 400 ? errorShape(answer.status, answer.text) : undefined
  }

  before(async () => {
    const port = await freePort()
    publicBase = `https://localhost:${port}`
    const certificate = makeCertificate(dir, 'nginx')
    ca = [certificate.pem]
    env = {
      ...sqliteDatabaseEnv(dir),
      PUBLIC_BASE_URL: publicBase,
      TRUST_PROXY: '127.0.0.1',
      // One key carries the whole load.
      RATE_LIMIT_PER_KEY: '0',
      RATE_LIMIT_FAILED_AUTH_PER_IP: String(FAILED_AUTH_LIMIT),
    }
    apiKey = await createKey({ PATH: process.env.PATH ?? '', ...env }, 'nginx test')
    instances = await Promise.all([startServer(env, dir), startServer(env, dir)])
    nginx = await startNginx(dir, { port, upstreams: instances.map((instance) => instance.port), certificate })
    await waitUntilReady(nginx, `https://127.0.0.1:${port}/healthz`, { ca })
  })

  after(async () => {
    if (nginx !== undefined) await stopProcess(nginx, { killAfterMs: 5_000 })
    await Promise.all(instances.map((instance) => stopServer(instance, 'SIGTERM', 15_000).catch(() => undefined)))
  })

  it(`restarts both instances one after the other, 1 s apart, ${ROUNDS} times, under keep-alive load: no answer from nginx, every 201 kept once`, async (t) => {
    const seed = await send('POST', '/v1/pets', { headers: authorized({ 'content-type': 'application/json' }), body: createBody('seed') })
    assert.equal(seed.status, 201, seed.text)
    const seedId = String((JSON.parse(seed.text) as { id: number }).id)

    const answers = new Map<string, number>()
    const problems: string[] = []
    const acknowledged = new Map<string, string>()
    const raced: { kind: Kind; headers: Record<string, string>; body: string }[] = []
    let running = true
    const loop = async (i: number) => {
      const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca })
      try {
        for (let n = 0; running; n++) {
          const kind = KINDS[(i + n) % KINDS.length] as Kind
          const name = `nginx ${kind} ${i}.${n}`
          const creates = kind === 'create' || kind === 'keyed create'
          const headers = authorized(creates ? { 'content-type': 'application/json' } : {})
          if (kind === 'keyed create') headers['idempotency-key'] = randomUUID()
          const url = kind === 'get' ? `/v1/pets/${seedId}` : kind === 'list' ? '/v1/pets?limit=20' : '/v1/pets'
          let answer: Answer
          try {
            answer = await send(creates ? 'POST' : 'GET', url, { headers, body: creates ? createBody(name) : undefined, agent })
          } catch (error) {
            problems.push(`${kind}: no answer from nginx: ${(error as Error).message}`)
            continue
          }
          answers.set(`${kind} ${answer.status}`, (answers.get(`${kind} ${answer.status}`) ?? 0) + 1)
          // The one 502 HTTP leaves possible (docs/deploying.md, Behind nginx): a POST sent on a connection the
          // kernel completed in the instant the instance stopped listening, reset after it was sent, which
          // nginx must not send twice. Rare (none in most runs), never for a read; a keyed one is retried below.
          if (creates && answer.status === 502) {
            raced.push({ kind, headers, body: createBody(name) })
            continue
          }
          if (!DOCUMENTED[kind].includes(answer.status)) problems.push(`${kind}: ${answer.status} ${answer.text.slice(0, 200)}`)
          const wrong = misshapen(answer)
          if (wrong !== undefined) problems.push(`${kind} ${answer.status}: ${wrong}`)
          if (answer.status === 201) {
            const id = String((JSON.parse(answer.text) as { id: number }).id)
            acknowledged.set(id, answer.text)
            if (answer.headers.location !== `${publicBase}/v1/pets/${id}`) problems.push(`${kind}: Location ${answer.headers.location}`)
          }
        }
      } finally {
        agent.destroy()
      }
    }
    const loops = Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)))
    try {
      await sleep(1_000)
      for (let round = 0; round < ROUNDS; round++) {
        for (const [i, instance] of instances.entries()) {
          assert.deepEqual(await stopServer(instance, 'SIGTERM', 15_000), { code: 0, signal: null }, instance.output())
          instances[i] = await startServer(env, dir, [], { port: instance.port })
          await sleep(1_000)
        }
      }
    } finally {
      running = false
      await loops
    }

    const counts = [...answers].map(([answer, n]) => `${answer}: ${n}`).join(', ')
    const retried = (nginx?.accessLog() ?? []).filter((line) => line.includes(', '))
    const retriedPosts = retried.filter((line) => line.includes(' POST ')).length
    t.diagnostic(`${counts}; ${retried.length} requests retried on the other instance, ${retriedPosts} of them POSTs`)
    assert.deepEqual(problems.slice(0, 20), [], `${problems.length} answers out of contract (${counts}); nginx:\n${nginx?.errors().slice(-30).join('\n')}`)
    // A restart nginx never noticed proved nothing: each left requests to be sent elsewhere.
    assert.ok(retried.length > 0, 'no request was retried on the other instance')
    const posts = [...answers].filter(([answer]) => answer.includes('create')).reduce((sum, [, n]) => sum + n, 0)
    assert.ok(raced.length <= Math.ceil(posts / 1_000), `${raced.length} creates answered 502 out of ${posts}`)
    // A client with an Idempotency-Key retries such a 502 with it, and gets its one pet.
    for (const { kind, headers, body } of raced.filter((create) => create.kind === 'keyed create')) {
      const retry = await send('POST', '/v1/pets', { headers, body })
      assert.equal(retry.status, 201, `${kind} retried after a 502: ${retry.status} ${retry.text}`)
      acknowledged.set(String((JSON.parse(retry.text) as { id: number }).id), retry.text)
    }

    const stored = new Map<string, string>()
    const agent = new https.Agent({ keepAlive: true, ca })
    let next: string | undefined = '/v1/pets?limit=100'
    while (next !== undefined) {
      const page = await send('GET', next, { headers: authorized(), agent })
      assert.equal(page.status, 200, page.text)
      for (const pet of JSON.parse(page.text) as { id: number }[]) stored.set(String(pet.id), JSON.stringify(pet))
      const link = /<([^>]+)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1]
      if (link !== undefined) assert.ok(link.startsWith(`${publicBase}/v1/pets?`), `Link ${link}`)
      next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search
    }
    agent.destroy()
    assert.deepEqual(
      [...acknowledged].filter(([id, body]) => stored.get(id) !== body).map(([id]) => id),
      [],
      'pets acknowledged with 201 but not kept as answered',
    )
    // nginx never sends a POST twice: every create, acknowledged or not, made one pet at most.
    const names = new Map<string, number>()
    for (const body of stored.values()) {
      const { name } = JSON.parse(body) as { name: string }
      names.set(name, (names.get(name) ?? 0) + 1)
    }
    assert.deepEqual([...names].filter(([, n]) => n > 1), [], 'creates stored more than once')
    assert.ok(acknowledged.size > 0, 'no create was acknowledged')
  })

  it("passes a 2 MB body on to the service, whose JSON 413 reaches the client; answers one over 64 MiB with its own, in the same shape", async () => {
    const large = await send('POST', '/v1/pets', {
      headers: authorized({ 'content-type': 'application/json' }),
      body: createBody('x'.repeat(2 * 1024 * 1024)),
    })
    assert.equal(large.status, 413, large.text)
    assert.equal(misshapen(large), undefined)
    assert.equal((JSON.parse(large.text) as { code: string }).code, 'payload_too_large')
    // Only the service's answers carry a request id.
    assert.ok(large.headers['x-request-id'] !== undefined, 'the 413 came from nginx')

    const huge = await rawExchange(`POST /v1/pets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${65 * 1024 * 1024}\r\n\r\n`)
    assert.equal(huge.status, 413, huge.text)
    assertNginxError(huge, 'payload_too_large')
  })

  it('answers a request line or a header nginx cannot read with its own 400 or 431 in the error shape', async () => {
    assertNginxError(await rawExchange('GARBAGE\r\n\r\n'), 'invalid_request')
    assertNginxError(await rawExchange(`GET /v1/pets HTTP/1.1\r\nHost: localhost\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`), 'request_header_fields_too_large')
  })

  it('gives the service the client address nginx saw, never one the client forwarded', async () => {
    const failWith = (localAddress: string, forwardedFor?: string) =>
      send('GET', '/v1/pets', {
        headers: { authorization: 'Bearer key_not_a_key', ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }) },
        localAddress,
      })
    // Round robin alternates between the two instances, each counting its own failures.
    for (let n = 0; n < 2 * FAILED_AUTH_LIMIT; n++) assert.equal((await failWith('127.0.0.2')).status, 401)
    for (let n = 0; n < 2; n++) {
      assert.equal((await failWith('127.0.0.2')).status, 429, '127.0.0.2 is over its limit on both instances')
      assert.equal((await failWith('127.0.0.2', '127.0.0.3')).status, 429, 'a client got out of its limit by forwarding another address')
      assert.equal((await failWith('127.0.0.3', '127.0.0.2')).status, 401, "a client was limited by the address it forwarded, not its own")
    }
  })

  it('answers 502 in the error shape, with Retry-After, when no instance is left', async () => {
    await Promise.all(instances.map((instance) => stopServer(instance, 'SIGTERM', 15_000)))
    for (const method of ['GET', 'POST']) {
      const answer = await send(method, '/v1/pets', { headers: authorized({ 'content-type': 'application/json' }), body: method === 'POST' ? createBody('none') : undefined })
      assert.equal(answer.status, 502, answer.text)
      assertNginxError(answer, 'unavailable')
      assert.equal(answer.headers['retry-after'], '5')
    }
  })

  /** An error nginx answered itself: the error shape with `code`, JSON, never cached, no request id of the service's. */
  function assertNginxError(answer: Answer, code: string): void {
    assert.equal(misshapen(answer), undefined)
    assert.equal((JSON.parse(answer.text) as { code: string }).code, code)
    assert.equal(answer.headers['content-type'], 'application/json')
    assert.equal(answer.headers['cache-control'], 'no-store')
    assert.equal(answer.headers['x-request-id'], undefined)
  }

  /** `request` written as it is on a TLS connection of its own to nginx, and the whole answer. */
  function rawExchange(request: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port: nginx?.port, ca, servername: 'localhost' }, () => socket.write(request))
      let received = ''
      const answered = () => {
        const headEnd = received.indexOf('\r\n\r\n')
        if (headEnd === -1) return
        const [statusLine = '', ...lines] = received.slice(0, headEnd).split('\r\n')
        const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
        const text = received.slice(headEnd + 4)
        // An answer nginx ends by closing lingers while the client may still send: it is whole at its length.
        if (Buffer.byteLength(text) < Number(headers['content-length'])) return
        socket.destroy()
        resolve({ status: Number(statusLine.split(' ')[1]), headers, text })
      }
      socket.setEncoding('utf8').on('data', (chunk: string) => {
        received += chunk
        answered()
      })
      socket.once('error', reject)
      socket.once('close', () => reject(new Error(`nginx closed the connection after: ${received}`)))
    })
  }
})
