import { X509Certificate, createPrivateKey } from 'node:crypto'
import fs from 'node:fs'
import type { RequestListener, Server, ServerOptions } from 'node:http'
import net from 'node:net'
import type { Server as TlsServer } from 'node:tls'
import type { FastifyBaseLogger } from 'fastify'
import { type Config, ConfigError } from '../config.js'

/*
 * HTTPS on the API port, for the deployment with no proxy in front (README, "TLS: in front or in the
 * service"). The certificate and key are files, reloaded without a restart, so that a renewal (every
 * few weeks with Let's Encrypt) drops no connection: connections already open keep the pair they
 * were made with, new ones get the new pair.
 */

/**
 * Sent on every answer over TLS. Two years: RFC 6797 sets no figure, and browsers' preload list asks for
 * at least one; a shorter age would let a browser fall back to plain HTTP, and keys with it, between
 * visits weeks apart. Without includeSubDomains: the API's host says nothing about the TLS of hosts
 * under it, which other teams may run.
 */
export const STRICT_TRANSPORT_SECURITY = 'max-age=63072000'

type TlsFiles = NonNullable<Config['tls']>

/**
 * A certificate and its key, as served; `fingerprint` (SHA-256) and `validTo` identify it in logs,
 * `notAfter` is `validTo` for the expiry metric.
 */
export interface CertificatePair {
  readonly cert: Buffer
  readonly key: Buffer
  readonly fingerprint: string
  readonly validTo: string
  readonly notAfter: Date
}

function readPem(variable: 'TLS_CERT_FILE' | 'TLS_KEY_FILE', file: string): Buffer {
  try {
    return fs.readFileSync(file)
  } catch (error) {
    throw new ConfigError(variable, `names ${file}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

/**
 * Reads the pair and checks it as a TLS handshake would need it: a PEM certificate, a PEM private key
 * without passphrase, and the one belonging to the other. A failure names the variable; the key's
 * content is never part of a message.
 */
export function readCertificatePair(files: TlsFiles): CertificatePair {
  const cert = readPem('TLS_CERT_FILE', files.certFile)
  const key = readPem('TLS_KEY_FILE', files.keyFile)
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(cert)
  } catch {
    throw new ConfigError('TLS_CERT_FILE', `names ${files.certFile}, which holds no PEM certificate`)
  }
  let privateKey: ReturnType<typeof createPrivateKey>
  try {
    privateKey = createPrivateKey(key)
  } catch {
    throw new ConfigError('TLS_KEY_FILE', `names ${files.keyFile}, which holds no PEM private key without a passphrase`)
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new ConfigError('TLS_KEY_FILE', `names ${files.keyFile}, which is not the key of the certificate in ${files.certFile}`)
  }
  return { cert, key, fingerprint: certificate.fingerprint256, validTo: certificate.validTo, notAfter: certificate.validToDate }
}

/**
 * The API port's server over TLS: HTTP/1.1 only (no ALPN, so no HTTP/2), with Strict-Transport-Security
 * on every answer, Fastify's and the ones written before Fastify has a request alike.
 *
 * The handshake is given as long as the headers are (HEADERS_TIMEOUT_MS), whose limit only starts once it
 * has finished: it is the same few kilobytes and round trips from the client, and a connection that
 * never finishes it would otherwise hold its socket, and a shutdown, for Node's two minutes.
 */
export function createHttpsServer(options: ServerOptions, pair: CertificatePair, listener: RequestListener): Server {
  const https = process.getBuiltinModule('node:https')
  const server = https.createServer({ ...options, handshakeTimeout: options.headersTimeout, cert: pair.cert, key: pair.key }, (request, response) => {
    response.setHeader('strict-transport-security', STRICT_TRANSPORT_SECURITY)
    listener(request, response)
  })
  // Node hands a failed or timed-out handshake to 'clientError', whose handler answers in HTTP and ends
  // the socket: a TLS socket without a finished handshake can carry no answer, and its end() never
  // closes it, so the connection would stay open for ever.
  server.removeAllListeners('tlsClientError')
  server.on('tlsClientError', (_error, socket) => socket.destroy())
  return server
}

/** How long file changes are gathered before a reload: a renewal writes the certificate and the key one after the other. */
const SETTLE_MS = 500

/**
 * How often each file's path is looked up. A renewal leaves the old certificate valid for weeks, so a
 * second is quick enough, and the look, one stat of each file, costs next to nothing.
 */
const POLL_MS = 1_000

/**
 * What a look at `file` saw: the file its path leads to now (through its symbolic links), with its size
 * and times, or why there is none. Two looks differ when anything a renewal does happened in between.
 */
function look(stats: fs.BigIntStats): string {
  return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`
}

function failedLook(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code ?? ''
  return code === 'ENOENT' ? 'missing' : `unreadable: ${code}`
}

const lookNow = (file: string): string => {
  try {
    return look(fs.statSync(file, { bigint: true }))
  } catch (error) {
    return failedLook(error)
  }
}

const lookLater = (file: string): Promise<string> => fs.promises.stat(file, { bigint: true }).then(look, failedLook)

/**
 * Reloads the pair when a file at its paths changes, or when asked (`reload`, on SIGHUP). The paths are
 * followed, not the files or folders found there at start: each is looked up afresh, through its symbolic links, so that a new
 * file, a swapped link (certbot's `live/`, Kubernetes' `..data`) and a folder replaced or removed and made
 * again are all seen. A pair that cannot be read, or does not match, keeps the one in use and is logged as
 * an error; an unchanged pair is not reloaded, and is logged as such when SIGHUP asked for it or after an
 * error. `serving()` gives the pair new connections get.
 */
export function reloadCertificates(
  server: Server,
  files: TlsFiles,
  serving: CertificatePair,
  logger: FastifyBaseLogger,
): { serving(): CertificatePair; reload(reason: string): void; close(): void } {
  let current = serving
  let failing = false
  const reload = (reason: string) => {
    let next: CertificatePair
    let unchanged: boolean
    try {
      next = readCertificatePair(files)
      unchanged = next.cert.equals(current.cert) && next.key.equals(current.key)
      // The API server is typed as Node's HTTP server, which createHttpsServer's is, on top of TLS.
      if (!unchanged) (server as unknown as TlsServer).setSecureContext({ cert: next.cert, key: next.key })
    } catch (error) {
      failing = true
      logger.error({ reason, err: (error as Error).message, fingerprint: current.fingerprint }, 'TLS certificate not reloaded: still serving the previous one')
      return
    }
    // After a change seen in the files, the other file of the pair often changes a look later: silence then.
    if (unchanged && (reason === 'SIGHUP' || failing)) logger.info({ reason, fingerprint: next.fingerprint, validTo: next.validTo }, 'TLS certificate unchanged')
    failing = false
    if (unchanged) return
    current = next
    logger.info({ reason, fingerprint: next.fingerprint, validTo: next.validTo }, 'TLS certificate reloaded')
  }

  let timer: NodeJS.Timeout | undefined
  const settle = () => {
    clearTimeout(timer)
    timer = setTimeout(() => reload('files changed'), SETTLE_MS)
  }
  // Polled, not watched: an inotify watch follows the folder it was set on, and misses the folder renamed
  // away or removed and made again. Not fs.watchFile either: it takes its first look later, on libuv's
  // thread pool, and never reports a change made before that look (a renewal as the server starts, on a
  // busy machine). Here the first look is taken now, so every change after it is seen.
  const paths = [...new Set([files.certFile, files.keyFile])]
  let seen = paths.map(lookNow)
  let looking = false
  let closed = false
  const poll = setInterval(() => {
    // A look that hangs (a network file system) is not stacked with others.
    if (looking) return
    looking = true
    void Promise.all(paths.map(lookLater)).then((looks) => {
      looking = false
      if (closed || looks.every((now, index) => now === seen[index])) return
      seen = looks
      settle()
    })
  }, POLL_MS)
  poll.unref()
  // A renewal between the first read and the first look would otherwise go unseen until the next one.
  reload('files changed while starting')
  return {
    serving: () => current,
    reload,
    close() {
      closed = true
      clearTimeout(timer)
      clearInterval(poll)
    },
  }
}

const LOOPBACK = new net.BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true
  const family = net.isIP(host)
  if (family === 0) return false
  if (family === 6 && host.toLowerCase().startsWith('::ffff:') && net.isIPv4(host.slice(7))) return LOOPBACK.check(host.slice(7), 'ipv4')
  return LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * The warning a production server logs at start when bearer keys would cross a network in clear text
 * (RFC 6750 §5.3 requires TLS for them): it listens beyond loopback, serves no TLS, and no TRUST_PROXY
 * says a proxy terminates TLS in front. Undefined when none of that is so.
 */
export function clearTextWarning(config: Config): string | undefined {
  if (config.environment !== 'production' || config.tls !== undefined || config.trustProxy !== false || isLoopback(config.host)) {
    return undefined
  }
  return (
    `listening on ${config.host}:${config.port} in plain HTTP: API keys would cross the network in clear text. ` +
    'Set TLS_CERT_FILE and TLS_KEY_FILE, or put a proxy that terminates TLS in front and set TRUST_PROXY, or listen on 127.0.0.1'
  )
}
