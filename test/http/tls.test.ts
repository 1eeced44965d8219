import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { pbkdf2 } from 'node:crypto'
import { once } from 'node:events'
import fs from 'node:fs'
import https from 'node:https'
import type net from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import tls from 'node:tls'
import { promisify } from 'node:util'
import { BIN, type NodeProcess, type ProcessGroup, processGroup, spawnNode } from '../../scripts/petstore-process.js'
import { onHangup } from '../../src/process/workers.js'
import { loadConfig } from '../../src/config.js'
import pino from 'pino'
import { createHttpServer } from '../../src/http/http-protocol.js'
import { createMetrics } from '../../src/http/metrics.js'
import { STRICT_TRANSPORT_SECURITY, clearTextWarning, readCertificatePair, reloadCertificates } from '../../src/http/tls.js'
import { type Certificate, HALF_CLIENT_HELLO, makeCertificate, opensslSkip, servedFingerprint, stalledHandshake } from '../certificates.js'
import { cleanupProcesses, freePort, runCli, trackedTempDir, until, within } from '../processes.js'

// HTTPS served by the service itself (TLS_CERT_FILE, TLS_KEY_FILE), over real TLS connections, with
// certificates made here by the openssl command. The transport does not depend on the database engine:
// these run on SQLite only.

after(cleanupProcesses)

/**
 * The layout certbot keeps: `live/cert.pem` and `live/key.pem` are symbolic links into an archive, and a
 * renewal points them at new files by renaming a new link over each, the certificate first.
 */
function liveFolder(dir: string, first: Certificate): { certFile: string; keyFile: string; renew(to: Certificate): void } {
  const live = path.join(dir, 'live')
  fs.mkdirSync(live)
  const link = (target: string, name: string) => {
    const temporary = path.join(live, `.${name}.new`)
    fs.symlinkSync(target, temporary)
    fs.renameSync(temporary, path.join(live, name))
  }
  link(first.certFile, 'cert.pem')
  link(first.keyFile, 'key.pem')
  return {
    certFile: path.join(live, 'cert.pem'),
    keyFile: path.join(live, 'key.pem'),
    renew(to) {
      link(to.certFile, 'cert.pem')
      link(to.keyFile, 'key.pem')
    },
  }
}

interface TlsServer extends NodeProcess {
  port: number
  metricsPort: number
  log(): string[]
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
  /** The certificate of the connection that carried it. */
  fingerprint: string
  /** Whether that connection had carried an earlier request (keep-alive). */
  reused: boolean
}

function get(port: number, pathname: string, { agent, ca }: { agent?: https.Agent; ca: Buffer[] }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.get({ host: '127.0.0.1', port, path: pathname, servername: 'localhost', ca, agent: agent ?? false }, (response) => {
      // Read now: at its end, a keep-alive response has given its socket back to the agent.
      const fingerprint256 = response.socket instanceof tls.TLSSocket ? response.socket.getPeerCertificate().fingerprint256 : 'not TLS'
      let body = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk))
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body,
          fingerprint: fingerprint256,
          reused: request.reusedSocket,
        }),
      )
    })
    request.once('error', reject)
    request.setTimeout(15_000, () => request.destroy(new Error(`GET ${pathname} was not answered`)))
  })
}

/** `petstore serve` over TLS on a free port of 127.0.0.1, with metrics on another; resolves once /healthz answers over HTTPS. */
async function startTlsServer(
  dir: string,
  files: { certFile: string; keyFile: string },
  ca: Buffer[],
  { args = [], env = {} }: { args?: string[]; env?: Record<string, string> } = {},
): Promise<TlsServer> {
  const [port, metricsPort] = [await freePort(), await freePort()]
  const started = spawnNode('petstore serve (TLS)', [BIN, 'serve', ...args], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}`,
      TLS_CERT_FILE: files.certFile,
      TLS_KEY_FILE: files.keyFile,
      ...env,
    },
    // A group of its own, so that a test that fails half-way can kill its --workers too.
    detached: true,
  })
  const server = Object.assign(started, { port, metricsPort, log: () => started.output().split('\n') })
  cleanupAfter(started)
  // Starting is not what these tests assert: --workers forks on a busy machine have taken over 10 s.
  await until(
    async () => {
      if (started.exit !== undefined) throw new Error(`the server exited:\n${started.output()}`)
      const answer = await get(port, '/healthz', { ca }).catch(() => undefined)
      return answer?.status === 200
    },
    30_000,
    () => `the server did not answer over HTTPS:\n${started.output()}`,
    100,
  )
  return server
}

const groups: ProcessGroup[] = []
function cleanupAfter(server: NodeProcess): void {
  groups.push(processGroup(server.pid))
}
after(() => {
  for (const group of groups) group.kill('SIGKILL')
})

async function stop(server: TlsServer): Promise<void> {
  server.child.kill('SIGTERM')
  await within(server.exited, 20_000, () => `the server did not stop:\n${server.output()}`)
  assert.equal(server.exit?.code, 0, server.output())
}

/**
 * Waits until both workers of `--workers 2` serve, before the files change: one still starting would read
 * the new files itself.
 */
async function untilBothWorkersListen(server: TlsServer): Promise<void> {
  await until(
    () => logLines(server, `Server listening at https://127.0.0.1:${server.port}`).length >= 2,
    30_000,
    () => `not both workers listen:\n${server.output()}`,
  )
}

/** Polls new connections until one is given `fingerprint`. */
async function untilServed(port: number, ca: Buffer[], fingerprint: string, what: string): Promise<void> {
  await until(
    async () => (await servedFingerprint(port, ca)) === fingerprint,
    20_000,
    () => what,
  )
}

/** The certificate's notAfter in Unix seconds, as openssl reads it. */
function notAfterOf(certificate: Certificate): number {
  const line = execFileSync('openssl', ['x509', '-enddate', '-noout', '-in', certificate.certFile], { encoding: 'utf8' })
  return Date.parse(line.trim().replace(/^notAfter=/, '')) / 1000
}

/**
 * Returns once the clock is in a new second. notAfter counts whole seconds, so a certificate made before
 * and one made after expire in different seconds, as a renewal does.
 */
async function nextSecond(): Promise<void> {
  await sleep(1_000 - (Date.now() % 1_000) + 5)
}

/** The values of the expiry metric in an exposition: none, or one per series. */
function exportedNotAfter(exposition: string): number[] {
  return [...exposition.matchAll(/^petstore_tls_certificate_not_after_timestamp_seconds (\S+)$/gm)].map((match) => Number(match[1]))
}

function logLines(server: TlsServer, message: string): Record<string, unknown>[] {
  return server
    .log()
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === message)
}

describe('TLS served by the service', { skip: opensslSkip }, () => {
  it('serves HTTPS with the configured certificate and Strict-Transport-Security on every answer, metrics staying plain HTTP', async () => {
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    const server = await startTlsServer(dir, first, [first.pem])
    try {
      assert.equal(await servedFingerprint(server.port, [first.pem]), first.fingerprint)
      for (const [pathname, status] of [
        ['/healthz', 200],
        ['/v1/pets', 401],
        ['/no/such/route', 404],
      ] as const) {
        const answer = await get(server.port, pathname, { ca: [first.pem] })
        assert.equal(answer.status, status, `${pathname}: ${answer.body}`)
        assert.equal(answer.headers['strict-transport-security'], STRICT_TRANSPORT_SECURITY, pathname)
      }
      // An answer written before Fastify has a request (HTTP that cannot be parsed) carries it too.
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host: '127.0.0.1', port: server.port, servername: 'localhost', ca: [first.pem] }, () => {
          socket.write('GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n')
        })
        let text = ''
        socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
        socket.once('end', () => resolve(text))
        socket.once('error', reject)
      })
      assert.match(raw, /^HTTP\/1\.1 400 /)
      assert.match(raw, new RegExp(`\r\nStrict-Transport-Security: ${STRICT_TRANSPORT_SECURITY}\r\n`))
      assert.ok(logLines(server, `Server listening at https://127.0.0.1:${server.port}`).length === 1, server.output())
      const metrics = await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)
      assert.equal(metrics.status, 200)
      await metrics.arrayBuffer()
    } finally {
      await stop(server)
    }
  })

  it('reloads a renewed certificate under load without dropping a request: open connections keep theirs, new ones get the new one', { timeout: 120_000 }, async () => {
    const dir = trackedTempDir('petstore-tls-')
    const [first, second] = [makeCertificate(dir, 'first'), makeCertificate(dir, 'second')]
    const ca = [first.pem, second.pem]
    const live = liveFolder(dir, first)
    const server = await startTlsServer(dir, live, ca)
    try {
      let stopping = false
      let renewedAt = Number.POSITIVE_INFINITY
      const failures: string[] = []
      const answers: (Answer & { after: boolean })[] = []
      const client = async (agent: https.Agent | undefined) => {
        while (!stopping) {
          try {
            const answer = await get(server.port, '/healthz', { agent, ca })
            answers.push({ ...answer, after: Date.now() > renewedAt })
            if (answer.status !== 200) failures.push(`${answer.status} ${answer.body}`)
          } catch (error) {
            failures.push((error as Error).message)
          }
        }
      }
      // Keep-alive clients, each on one connection, and one that makes a new connection per request.
      const agents = Array.from({ length: 6 }, () => new https.Agent({ keepAlive: true, maxSockets: 1, maxCachedSessions: 0 }))
      const clients = [...agents.map((agent) => client(agent)), client(undefined)]
      while (answers.length < 100) await sleep(20)

      live.renew(second)
      renewedAt = Date.now()
      await untilServed(server.port, ca, second.fingerprint, 'new connections were never given the renewed certificate')
      const served = answers.length
      while (answers.length < served + 200) await sleep(20)
      stopping = true
      await Promise.all(clients)
      for (const agent of agents) agent.destroy()

      assert.deepEqual(failures, [], 'every request was answered 200')
      // Connections opened before the renewal went on serving with the certificate they began with.
      assert.ok(answers.some((answer) => answer.after && answer.reused && answer.fingerprint === first.fingerprint))
      assert.ok(answers.some((answer) => answer.after && !answer.reused && answer.fingerprint === second.fingerprint))
      const reloaded = logLines(server, 'TLS certificate reloaded')
      assert.equal(reloaded.length, 1, server.output())
      assert.equal(reloaded[0]?.fingerprint, second.fingerprint)
      assert.deepEqual(logLines(server, 'TLS certificate not reloaded: still serving the previous one'), [])
    } finally {
      await stop(server)
    }
  })

  for (const to of ['primary', 'process group'] as const) {
    it(`reloads on SIGHUP sent to the ${to}, every worker of --workers once, through its primary, and keeps running`, { timeout: 120_000 }, async () => {
      const dir = trackedTempDir('petstore-tls-')
      const [first, second] = [makeCertificate(dir, 'first'), makeCertificate(dir, 'second')]
      const ca = [first.pem, second.pem]
      const live = liveFolder(dir, first)
      const server = await startTlsServer(dir, live, ca, { args: ['--workers', '2'] })
      try {
        await untilBothWorkersListen(server)
        fs.copyFileSync(second.certFile, first.certFile)
        fs.copyFileSync(second.keyFile, first.keyFile)
        // A terminal that closes sends it to the group: the workers leave it to their primary.
        process.kill(to === 'primary' ? server.pid : -server.pid, 'SIGHUP')
        await untilServed(server.port, ca, second.fingerprint, 'SIGHUP did not reload the certificate')
        // A worker whose look at the files came first finds the pair unchanged on SIGHUP, and says so.
        const answeredHangup = () =>
          new Set([...logLines(server, 'TLS certificate reloaded'), ...logLines(server, 'TLS certificate unchanged')].filter((line) => line.reason === 'SIGHUP').map((line) => line.pid))
        await until(
          () => answeredHangup().size >= 2,
          20_000,
          () => `not both workers answered SIGHUP:\n${server.output()}`,
        )
        assert.equal(logLines(server, 'TLS certificate reloaded').length, 2, server.output())
        // Connections are spread over both workers: every new one now gets the new certificate.
        for (let i = 0; i < 10; i++) assert.equal(await servedFingerprint(server.port, ca), second.fingerprint)
        assert.equal(server.exit, undefined, 'SIGHUP does not stop the service')
        assert.equal((await get(server.port, '/healthz', { ca })).status, 200)
        // Once each: a worker that acted on the group's signal as well would have logged the pair unchanged.
        assert.equal(answeredHangup().size, logLines(server, 'TLS certificate reloaded').length + logLines(server, 'TLS certificate unchanged').length, server.output())
      } finally {
        await stop(server)
      }
    })
  }

  it('exports the notAfter of the served certificate once, not summed over --workers, and the renewed one after a renewal', { timeout: 120_000 }, async () => {
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    await nextSecond()
    const second = makeCertificate(dir, 'second')
    const live = liveFolder(dir, first)
    const server = await startTlsServer(dir, live, [first.pem, second.pem], { args: ['--workers', '2'] })
    const scraped = async () => exportedNotAfter(await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text())
    try {
      await untilBothWorkersListen(server)
      assert.deepEqual(await scraped(), [notAfterOf(first)])
      live.renew(second)
      await until(
        () => logLines(server, 'TLS certificate reloaded').length >= 2,
        20_000,
        () => `not both workers reloaded:\n${server.output()}`,
      )
      assert.deepEqual(await scraped(), [notAfterOf(second)])
      assert.notEqual(notAfterOf(second), notAfterOf(first))
    } finally {
      await stop(server)
    }
  })

  it('keeps serving the certificate in use when the new files are not a pair, and says so', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-tls-')
    const [first, second] = [makeCertificate(dir, 'first'), makeCertificate(dir, 'second')]
    const live = liveFolder(dir, first)
    const server = await startTlsServer(dir, live, [first.pem])
    try {
      // The new certificate with the old key: a half-finished renewal, or a mistake.
      live.renew({ ...second, keyFile: first.keyFile })
      await until(
        () => logLines(server, 'TLS certificate not reloaded: still serving the previous one').length > 0,
        20_000,
        () => `no error was logged:\n${server.output()}`,
      )
      const [refused] = logLines(server, 'TLS certificate not reloaded: still serving the previous one')
      assert.match(String(refused?.err), /^TLS_KEY_FILE names .* which is not the key of the certificate/)
      assert.equal(refused?.level, 50)
      server.child.kill('SIGHUP')
      assert.equal(await servedFingerprint(server.port, [first.pem]), first.fingerprint)
      assert.equal((await get(server.port, '/healthz', { ca: [first.pem] })).status, 200)
      assert.deepEqual(logLines(server, 'TLS certificate reloaded'), [])
    } finally {
      await stop(server)
    }
  })

  it('closes connections whose TLS handshake is not finished within HEADERS_TIMEOUT_MS, whatever they sent', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    const server = await startTlsServer(dir, first, [first.pem], { env: { HEADERS_TIMEOUT_MS: '1000' } })
    try {
      const stalled = await Promise.all([stalledHandshake(server.port, Buffer.alloc(0)), stalledHandshake(server.port, HALF_CLIENT_HELLO)])
      const openedAt = performance.now()
      try {
        await within(Promise.all(stalled.map(({ closed }) => closed)), 6_000, () => `a stalled handshake was still open:\n${server.output()}`)
      } finally {
        for (const { socket } of stalled) socket.destroy()
      }
      assert.ok(performance.now() - openedAt >= 900, 'closed before HEADERS_TIMEOUT_MS')
      assert.equal((await get(server.port, '/healthz', { ca: [first.pem] })).status, 200)
    } finally {
      await stop(server)
    }
  })

  it('stops cleanly on SIGTERM with a connection part-way through its handshake, closing it once quiet', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    // Limits far beyond the shutdown's: only the drain can close the stalled connection in time.
    const env = { HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '60000', SHUTDOWN_TIMEOUT_MS: '3000' }
    const server = await startTlsServer(dir, first, [first.pem], { env })
    const stalled = await stalledHandshake(server.port, HALF_CLIENT_HELLO)
    try {
      await stop(server)
      await within(stalled.closed, 1_000, () => 'the stalled connection was left open')
      assert.equal(logLines(server, 'shut down cleanly').length, 1, server.output())
    } finally {
      stalled.socket.destroy()
    }
  })

  it('refuses to start with files it cannot serve, naming the variable', async () => {
    const dir = trackedTempDir('petstore-tls-')
    const [first, second] = [makeCertificate(dir, 'first'), makeCertificate(dir, 'second')]
    const notPem = path.join(dir, 'not.pem')
    fs.writeFileSync(notPem, 'hello\n')
    const cases: [Record<string, string>, RegExp][] = [
      [{ TLS_CERT_FILE: path.join(dir, 'missing.pem'), TLS_KEY_FILE: first.keyFile }, /^petstore: invalid configuration: TLS_CERT_FILE names .*missing\.pem, which cannot be read \(ENOENT\)\n$/],
      [{ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: path.join(dir, 'missing.pem') }, /^petstore: invalid configuration: TLS_KEY_FILE names .*missing\.pem, which cannot be read \(ENOENT\)\n$/],
      [{ TLS_CERT_FILE: notPem, TLS_KEY_FILE: first.keyFile }, /^petstore: invalid configuration: TLS_CERT_FILE names .*not\.pem, which holds no PEM certificate\n$/],
      [{ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: notPem }, /^petstore: invalid configuration: TLS_KEY_FILE names .*not\.pem, which holds no PEM private key/],
      [{ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: second.keyFile }, /^petstore: invalid configuration: TLS_KEY_FILE names .*second-key\.pem, which is not the key of the certificate in .*first-cert\.pem\n$/],
      [{ TLS_CERT_FILE: first.certFile }, /^petstore: invalid configuration: TLS_KEY_FILE must be set when TLS_CERT_FILE is/],
    ]
    for (const [env, expected] of cases) {
      for (const args of [['serve'], ['serve', '--workers', '2']]) {
        const result = await runCli(args, { ...env, HOST: '127.0.0.1', PORT: String(await freePort()), METRICS_PORT: 'off' }, dir)
        assert.equal(result.code, 1, `${JSON.stringify(env)} ${args.join(' ')}: ${result.stderr}`)
        assert.match(result.stderr, expected)
        assert.doesNotMatch(result.stderr, /PRIVATE KEY/)
      }
    }
  })
})

/** The service's TLS server and its certificate reload, in this process: a renewal is watched from its log. */
interface Reloading {
  port: number
  /** Every certificate the test may renew to, for clients that must accept any. */
  ca: Buffer[]
  logged(message: string): Record<string, unknown>[]
  /** The notAfter of the pair new connections get. */
  notAfter(): Date
  close(): void
}

async function startReloading(files: { certFile: string; keyFile: string }, ca: Buffer[]): Promise<Reloading> {
  const lines: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  const pair = readCertificatePair(files)
  const server = createHttpServer((_request, response) => response.end('ok'), { timeouts: { requestMs: 10_000, headersMs: 5_000, keepAliveMs: 60_000 }, tls: pair, addresses: { log: true, behindProxy: false } }, logger)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const reloading = reloadCertificates(server, files, pair, logger)
  // As startServer wires it (src/process/server.ts): this process is no cluster worker, so the signal itself.
  const offHangup = onHangup(() => reloading.reload('SIGHUP'))
  return {
    port: (server.address() as net.AddressInfo).port,
    ca,
    logged: (message) => lines.filter((line) => line.msg === message),
    notAfter: () => reloading.serving().notAfter,
    close() {
      offHangup()
      reloading.close()
      server.closeAllConnections()
      server.close()
    },
  }
}

const NOT_RELOADED = 'TLS certificate not reloaded: still serving the previous one'

/** Waits, bounded, until `server` has logged `message` `count` times. */
async function untilLogged(server: Reloading, message: string, count: number): Promise<void> {
  const deadline = performance.now() + 20_000
  while (server.logged(message).length < count) {
    if (performance.now() > deadline) assert.fail(`"${message}" was logged ${server.logged(message).length} times, not ${count}`)
    await sleep(50)
  }
}

/** Certificate files as a tool keeps them, and that tool's renewal. */
interface Layout {
  certFile: string
  keyFile: string
  renew(to: Certificate, server: Reloading): void | Promise<void>
}

/** Writes `pair` as `cert.pem` and `key.pem` in `folder`, over whatever files are there (the same inodes). */
function writePair(folder: string, pair: Certificate): { certFile: string; keyFile: string } {
  const files = { certFile: path.join(folder, 'cert.pem'), keyFile: path.join(folder, 'key.pem') }
  fs.writeFileSync(files.certFile, pair.pem)
  fs.writeFileSync(files.keyFile, fs.readFileSync(pair.keyFile))
  return files
}

/**
 * A Secret mounted by Kubernetes: `tls.crt` and `tls.key` are links through `..data`, itself a link to a
 * timestamped folder; an update writes a new folder, renames a new `..data` link over the old one and
 * removes the old folder (the kubelet's AtomicWriter).
 */
function kubernetesSecret(dir: string, first: Certificate): Layout {
  const mount = path.join(dir, 'secret')
  fs.mkdirSync(mount)
  let version = 0
  const update = (pair: Certificate) => {
    const data = path.join(mount, '..data')
    const previous = fs.existsSync(data) ? fs.readlinkSync(data) : undefined
    const folder = `..2026_11_27_10_00_0${version++}.123456789`
    fs.mkdirSync(path.join(mount, folder))
    fs.writeFileSync(path.join(mount, folder, 'tls.crt'), pair.pem)
    fs.writeFileSync(path.join(mount, folder, 'tls.key'), fs.readFileSync(pair.keyFile))
    fs.symlinkSync(folder, path.join(mount, '..data_tmp'))
    fs.renameSync(path.join(mount, '..data_tmp'), data)
    if (previous !== undefined) fs.rmSync(path.join(mount, previous), { recursive: true })
  }
  update(first)
  fs.symlinkSync('..data/tls.crt', path.join(mount, 'tls.crt'))
  fs.symlinkSync('..data/tls.key', path.join(mount, 'tls.key'))
  return { certFile: path.join(mount, 'tls.crt'), keyFile: path.join(mount, 'tls.key'), renew: update }
}

const LAYOUTS: Record<string, (dir: string, first: Certificate) => Layout> = {
  'the files rewritten in place': (dir, first) => {
    const folder = path.join(dir, 'tls')
    fs.mkdirSync(folder)
    return { ...writePair(folder, first), renew: (to) => void writePair(folder, to) }
  },
  "certbot's symbolic links swapped": (dir, first) => liveFolder(dir, first),
  "a Kubernetes Secret's ..data link swapped": kubernetesSecret,
  'the folder renamed away and a new one made': (dir, first) => {
    const folder = path.join(dir, 'tls')
    fs.mkdirSync(folder)
    let renewals = 0
    const renew = (to: Certificate) => {
      fs.renameSync(folder, `${folder}.old${renewals++}`)
      fs.mkdirSync(folder)
      writePair(folder, to)
    }
    return { ...writePair(folder, first), renew }
  },
  'the folder removed, and made again after a pause': (dir, first) => {
    const folder = path.join(dir, 'tls')
    fs.mkdirSync(folder)
    const renew = async (to: Certificate, server: Reloading) => {
      const refused = server.logged(NOT_RELOADED).length
      const serving = await servedFingerprint(server.port, server.ca)
      fs.rmSync(folder, { recursive: true })
      // The pause: the files are found missing, and the pair in use is kept meanwhile.
      await untilLogged(server, NOT_RELOADED, refused + 1)
      assert.match(String(server.logged(NOT_RELOADED).at(-1)?.err), /which cannot be read \(ENOENT\)$/)
      assert.equal(await servedFingerprint(server.port, server.ca), serving, 'the server stopped serving its certificate while the files were missing')
      fs.mkdirSync(folder)
      writePair(folder, to)
    }
    return { ...writePair(folder, first), renew }
  },
}

describe('certificate renewal as tools do it', { skip: opensslSkip }, () => {
  for (const [name, layout] of Object.entries(LAYOUTS)) {
    it(`serves new connections the new certificate after ${name}, twice, open connections keeping theirs`, { timeout: 90_000 }, async () => {
      const dir = trackedTempDir('petstore-tls-')
      const pairs = ['first', 'second', 'third'].map((pair) => makeCertificate(dir, pair))
      const files = layout(dir, pairs[0] as Certificate)
      const server = await startReloading(files, pairs.map((pair) => pair.pem))
      try {
        for (const [renewal, [from, to]] of [[pairs[0], pairs[1]], [pairs[1], pairs[2]]].entries()) {
          assert.ok(from !== undefined && to !== undefined)
          const agent = new https.Agent({ keepAlive: true, maxSockets: 1, maxCachedSessions: 0 })
          try {
            assert.equal((await get(server.port, '/', { agent, ca: server.ca })).fingerprint, from.fingerprint)
            await files.renew(to, server)
            await untilServed(server.port, server.ca, to.fingerprint, `renewal ${renewal + 1}: new connections were never given the new certificate`)
            const kept = await get(server.port, '/', { agent, ca: server.ca })
            assert.deepEqual([kept.status, kept.reused, kept.fingerprint], [200, true, from.fingerprint], 'an open connection keeps its certificate')
          } finally {
            agent.destroy()
          }
          const reloaded = server.logged('TLS certificate reloaded')
          assert.equal(reloaded.length, renewal + 1)
          assert.deepEqual([reloaded.at(-1)?.reason, reloaded.at(-1)?.fingerprint], ['files changed', to.fingerprint])
        }
        if (!name.includes('removed')) assert.deepEqual(server.logged(NOT_RELOADED), [])
      } finally {
        server.close()
      }
    })
  }

  // The files change as the reloading starts, while libuv's thread pool is busy (here with key derivations;
  // on a loaded machine, with threads waiting for a CPU): a watch that takes its first look on that pool
  // (fs.watchFile) looks only after the renewal, and never sees it.
  for (const [name, layout] of Object.entries(LAYOUTS).filter(([name]) => !name.includes('removed'))) {
    it(`serves the new certificate after ${name} as the reloading starts, the thread pool busy`, { timeout: 90_000 }, async () => {
      const dir = trackedTempDir('petstore-tls-')
      const [first, second] = ['first', 'second'].map((pair) => makeCertificate(dir, pair)) as [Certificate, Certificate]
      const files = layout(dir, first)
      const busy = Array.from({ length: 8 }, () => promisify(pbkdf2)('busy', 'pool', 400_000, 32, 'sha256'))
      const server = await startReloading(files, [first.pem, second.pem])
      try {
        await files.renew(second, server)
        await untilServed(server.port, server.ca, second.fingerprint, 'new connections were never given the certificate renewed as the reloading started')
        assert.deepEqual(server.logged('TLS certificate reloaded').map((line) => [line.reason, line.fingerprint]), [['files changed', second.fingerprint]])
      } finally {
        await Promise.all(busy)
        server.close()
      }
    })
  }

  it('logs on SIGHUP that the pair is unchanged, and keeps serving it', async () => {
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    fs.mkdirSync(path.join(dir, 'tls'))
    const server = await startReloading(writePair(path.join(dir, 'tls'), first), [first.pem])
    try {
      process.kill(process.pid, 'SIGHUP')
      await untilLogged(server, 'TLS certificate unchanged', 1)
      const [unchanged] = server.logged('TLS certificate unchanged')
      assert.deepEqual([unchanged?.level, unchanged?.reason, unchanged?.fingerprint], [30, 'SIGHUP', first.fingerprint])
      assert.equal(await servedFingerprint(server.port, [first.pem]), first.fingerprint)
      assert.deepEqual(server.logged('TLS certificate reloaded'), [])
    } finally {
      server.close()
    }
  })
})

describe('the certificate expiry metric', { skip: opensslSkip }, () => {
  it('is absent without a certificate, then the notAfter of the one served, and the renewed one after a renewal', async () => {
    const metrics = createMetrics({ processMetrics: false })
    assert.deepEqual(exportedNotAfter(await metrics.registry.metrics()), [])
    const dir = trackedTempDir('petstore-tls-')
    const first = makeCertificate(dir, 'first')
    await nextSecond()
    const second = makeCertificate(dir, 'second')
    const folder = path.join(dir, 'tls')
    fs.mkdirSync(folder)
    const server = await startReloading(writePair(folder, first), [first.pem, second.pem])
    try {
      metrics.watchCertificate(() => server.notAfter())
      assert.deepEqual(exportedNotAfter(await metrics.registry.metrics()), [notAfterOf(first)])
      writePair(folder, second)
      await untilLogged(server, 'TLS certificate reloaded', 1)
      assert.deepEqual(exportedNotAfter(await metrics.registry.metrics()), [notAfterOf(second)])
      assert.notEqual(notAfterOf(second), notAfterOf(first))
    } finally {
      server.close()
    }
  })
})

describe('the clear-text warning', () => {
  it('warns in production only when keys would cross a network in clear text', () => {
    const tlsFiles = { TLS_CERT_FILE: '/etc/cert.pem', TLS_KEY_FILE: '/etc/key.pem' }
    const hosts = { '0.0.0.0': true, '::': true, '10.0.0.5': true, 'api.internal': true, '127.0.0.1': false, '127.1.2.3': false, '::1': false, localhost: false }
    let cases = 0
    for (const environment of ['production', 'staging']) {
      for (const [host, beyondLoopback] of Object.entries(hosts)) {
        for (const secured of [{}, tlsFiles, { TRUST_PROXY: 'true' }, { TRUST_PROXY: '10.0.0.0/8' }]) {
          const config = loadConfig({ PETSTORE_ENV: environment, HOST: host, ...secured }, '/')
          const expected = environment === 'production' && beyondLoopback && Object.keys(secured).length === 0
          const warning = clearTextWarning(config)
          assert.equal(warning !== undefined, expected, `${environment} ${host} ${JSON.stringify(secured)}`)
          if (warning !== undefined) assert.match(warning, /API keys would cross the network in clear text/)
          cases++
        }
      }
    }
    assert.equal(cases, 64)
  })

  it('is logged by petstore serve at start', async () => {
    const dir = trackedTempDir('petstore-tls-')
    // A database in a folder that does not exist stops the start after the warning and before listening on every interface.
    const result = await runCli(['serve'], { HOST: '0.0.0.0', METRICS_PORT: 'off', DATABASE_URL: `sqlite://${dir}/missing/petstore.db` }, dir)
    assert.equal(result.code, 1)
    const warning = result.stdout.split('\n').find((line) => line.includes('in clear text'))
    assert.ok(warning !== undefined, result.stdout)
    assert.equal((JSON.parse(warning) as { level: number }).level, 40)
    assert.match(result.stderr, /^petstore: invalid configuration: DATABASE_URL names .*missing\/petstore\.db, in a folder that does not exist/)
  })
})
