import fs from 'node:fs'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { Worker } from 'node:worker_threads'
import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { buildApp } from '../app.js'
import { isWorker, noWorkerListening, onHangup } from './workers.js'
import type { Config } from '../config.js'
import { flushLog } from '../logger.js'
import { type Acceptors, openAcceptors } from './acceptors.js'
import { capConnections, connectionCaps, createShedding, descriptorLimit, guardedMemoryUsage } from './descriptors.js'
import { STOP_SIGNALS, followConnections, shutdownDeadlineMs } from './drain.js'
import { createMetrics } from '../http/metrics.js'
import { readCertificatePair, reloadCertificates } from '../http/tls.js'
import { type MetricsListener, answerReadinessForPrimary, appReadiness, processSource, reportToPrimary, startMetricsListener } from './operations-listener.js'
import { type Storage, openMigratedStorage, openStorage } from '../repositories.js'
import { releaseVersion } from '../shared/release.js'
import type { Tracing } from '../tracing/tracing.js'

export interface RunningServer {
  app: FastifyInstance
  /** Drains, stops accepting, lets in-flight requests finish, then closes the database. */
  close(): Promise<void>
}

/** Listening sockets added to the server's own in a process that accepts its connections itself (acceptors.ts). */
const EXTRA_ACCEPTORS = 15

/** The most a graceful shutdown waits for the last spans to reach the collector. */
const TRACING_FLUSH_MS = 2_000

/**
 * Opens storage, applies migrations (unless told not to) and listens, with `GET /metrics` on a
 * listener of its own (METRICS_PORT); a cluster worker leaves that to its primary. With `tracing`,
 * requests and their database work are traced, and the last spans are flushed on close.
 */
export async function startServer(
  config: Config,
  logger: Logger,
  {
    migrate = true,
    tracing,
    listening,
  }: {
    migrate?: boolean
    tracing?: Tracing
    /** Called as the API port starts listening, in that turn of the event loop, before it answers anything. */
    listening?: (server: RunningServer) => void
  } = {},
): Promise<RunningServer> {
  // Read before the database is opened: a certificate that cannot be served stops the start, naming its variable.
  const certificates = config.tls === undefined ? undefined : readCertificatePair(config.tls)
  const options = { traceRepository: tracing?.traceSqliteRepository }
  let storage: Storage
  if (migrate) {
    const opened = await openMigratedStorage(config.database, 'DATABASE_URL', logger, options)
    if (opened.applied.length > 0) logger.info({ migrations: opened.applied }, 'applied migrations')
    storage = opened.storage
  } else {
    storage = await openStorage(config.database, 'DATABASE_URL', logger, options)
  }
  let draining = false
  const metrics = createMetrics({ release: releaseVersion() })
  const shedding = createShedding(metrics.registry, logger)
  process.memoryUsage = guardedMemoryUsage(shedding)
  const descriptors = descriptorLimit()
  const caps = connectionCaps(descriptors ?? Number.POSITIVE_INFINITY, config.database.engine === 'postgres' ? config.database.poolSize : 0)
  logger.info({ descriptors: descriptors ?? 'unlimited', connectionCaps: caps }, 'connection caps set from the descriptor limit')
  // getPet calls are counted by the app's own recorder, which app.close() flushes while the database is still open.
  const app = await buildApp({ config, storage, logger, isDraining: () => draining, metrics, traceIds: tracing?.currentIds, tls: certificates })
  let metricsListener: MetricsListener | undefined
  let appClosed = false
  const readiness = appReadiness(app, () => appClosed)
  if (isWorker()) {
    reportToPrimary(metrics)
    answerReadinessForPrimary(readiness)
  } else if (config.metrics !== undefined) {
    metricsListener = await startMetricsListener(config.metrics, processSource(metrics), logger, readiness, {
      timeouts: config.timeouts,
      maxConnections: caps.operations,
      shedding,
    })
  }
  const connections = followConnections(app.server)
  // Before listening: once a client can connect, a renewal or a SIGHUP is acted on.
  const reloading = config.tls === undefined || certificates === undefined ? undefined : reloadCertificates(app.server, config.tls, certificates, logger)
  const offHangup = reloading === undefined ? undefined : onHangup(() => reloading.reload('SIGHUP'))
  if (reloading !== undefined) metrics.watchCertificate(() => reloading.serving().notAfter)
  let acceptors: Acceptors | undefined
  /** The start's listening, which a stop that begins during it waits for: it then closes all it opened. */
  let listened: Promise<void> | undefined
  const running: RunningServer = {
    app,
    async close() {
      offHangup?.()
      reloading?.close()
      // The load balancer learns from /readyz that this instance is going and stops sending new
      // connections, while the connections it has keep being served as usual: one closed now would
      // only come back as a new connection, and be reset if it still waited in the kernel's accept
      // queue when the listener closed.
      draining = true
      await sleep(config.shutdownDrainMs)
      await listened?.catch(() => undefined)
      acceptors?.close()
      connections.stopAccepting()
      // A worker whose event loop is held (SQLite's busy wait for the write lock, up to its busy timeout)
      // stops listening late, and until the last one does the primary accepts connections for the service
      // and resets those it still queues when it closes the socket. So this worker closes its own only after
      // every worker stopped listening, waiting as long as the shutdown's budget leaves after that closing.
      if (isWorker()) await noWorkerListening(Math.max(config.shutdownDrainMs, config.shutdownTimeoutMs - config.shutdownDrainMs))
      await connections.closeConnections(config.shutdownDrainMs)
      // Nothing is left for it to close but the app itself: its hooks, and the recorder it flushes.
      appClosed = true
      await app.close()
      await storage.close()
      // Within the shutdown budget: a collector that is down or slow must not hold the exit.
      await tracing?.shutdown(Math.min(TRACING_FLUSH_MS, config.shutdownTimeoutMs))
      // Last, so that the figures of the final requests can still be scraped during the drain.
      await metricsListener?.close()
    },
  }
  // From its first connection on: the rest of the start (a host name's other addresses, the extra acceptors)
  // takes turns of the event loop of its own, in which connections are accepted and answered.
  app.server.once('listening', () => {
    capConnections(app.server, caps.api, shedding)
    listening?.(running)
  })
  try {
    // A cluster worker's connections are accepted by its primary, whose event loop does nothing
    // else. A port that another process holds is listened on alone, to fail naming PORT.
    const batched = !isWorker() && !(await portInUse(config.host, config.port))
    // Node's default backlog (511) overflows when hundreds of clients connect at once: the kernel
    // then drops their SYNs and each waits 1 s or more to retry before it is even accepted.
    const listen = { port: config.port, host: config.host, backlog: config.listenBacklog, reusePort: batched }
    listened = (async () => {
      await app.listen({ ...listen, listenTextResolver: listenText(certificates !== undefined) })
      if (!batched) return
      acceptors = await openAcceptors(app.server, {
        ...listen,
        port: (app.server.address() as net.AddressInfo).port,
        count: EXTRA_ACCEPTORS,
        acceptFailed: (error) => app.server.emit('error', error),
      })
    })()
    await listened
  } catch (error) {
    offHangup?.()
    reloading?.close()
    await metricsListener?.close()
    throw error
  }
  return running
}

/** How often a port in use is tried again while waiting for it. */
const PORT_RETRY_MS = 100

/**
 * Waits until the API port and the metrics port can be listened on, for as long as an instance of the
 * same configuration may take to release them: a replacement started while its predecessor drains
 * (a supervisor's restart, a deploy script) then takes over instead of failing on EADDRINUSE. A port
 * still in use after that is left to fail at listen, naming its variable. The default metrics port is
 * waited for only behind a predecessor (the API port was in use): taken while the API port is free, it
 * is another instance's on this host, and the service goes without /metrics at once.
 */
export async function waitForPorts(config: Config, logger: Logger): Promise<void> {
  const waitMs = shutdownDeadlineMs(config)
  const deadline = performance.now() + waitMs
  const waitFor = async (variable: string, host: string, port: number): Promise<boolean> => {
    if (port === 0 || !(await portInUse(host, port))) return false
    logger.warn({ variable, host, port }, `${variable} ${port} is in use: waiting up to ${waitMs} ms for it, as for a previous instance shutting down`)
    while (performance.now() < deadline && (await portInUse(host, port))) await sleep(PORT_RETRY_MS)
    logger.info({ variable, host, port }, `${variable} ${port} waited for`)
    return true
  }
  const predecessor = await waitFor('PORT', config.host, config.port)
  const { metrics } = config
  if (metrics !== undefined && (metrics.chosen || predecessor)) await waitFor('METRICS_PORT', metrics.host, metrics.port)
}

/** Whether listening on `host:port` now fails with EADDRINUSE; any other failure is left to the real listen. */
function portInUse(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer()
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'EADDRINUSE'))
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(false)))
  })
}

/** Fastify's "listening" line, with the scheme it cannot know: the server factory makes the HTTPS server. */
const listenText = (secure: boolean) => (address: string) => `Server listening at ${secure ? address.replace(/^http:/, 'https:') : address}`

/**
 * The signals of a fault, which close-with-grace would answer with a close and exit 0. They keep Node's default,
 * death by the signal, which a supervisor sees as a failure: after a real fault (not one sent with kill) the
 * process is in no state to run JavaScript, and a listener can leave it hung instead (Node's Signal events).
 */
const FAULT_SIGNALS = ['SIGILL', 'SIGTRAP', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGSEGV'] as const

/**
 * Signals sent in the same instant are one stop: a group signal (systemd's KillMode=control-group,
 * `timeout`, Ctrl-C in a terminal) reaches npm and the server together, and npm passes its own on.
 */
const SAME_STOP_MS = 1_000

/**
 * On SIGTERM or SIGINT: drain, stop accepting, finish in-flight requests, close the database,
 * exit 0. If that takes longer than the drain plus the shutdown timeout, exit 1.
 *
 * Further signals during the shutdown do not cut it short: supervisors escalate with SIGKILL, never
 * with a second SIGTERM, while a group signal, npm passing one on and npm's exit (stopWithNpm) each
 * deliver one more. Only a SIGINT sent a moment after the first (Ctrl-C pressed again) exits at once, with 1.
 * SIGHUP never stops the server: serving TLS, it reloads the certificate (src/http/tls.ts), as it
 * makes nginx reload; without, there is nothing to reload, and that is logged.
 */
export function closeOnSignals(
  server: RunningServer,
  config: Config,
  logger: Logger,
  { worker = false }: { worker?: boolean } = {},
): void {
  const delay = config.shutdownDrainMs + config.shutdownTimeoutMs
  // Uncaught errors still close gracefully through close-with-grace; the signals are handled here,
  // since it ends the process on any second signal.
  const grace = closeWithGrace({ delay, logger, skip: [...STOP_SIGNALS, 'SIGHUP', ...FAULT_SIGNALS] }, async ({ err }) => {
    if (err !== undefined) logger.error({ err }, 'fatal error, shutting down')
    await server.close()
    logger.info('shut down cleanly')
    await flushLog(logger)
  })
  let stoppingSince: number | undefined
  const onStop = (signal: NodeJS.Signals) => {
    if (stoppingSince === undefined) {
      stoppingSince = performance.now()
      logger.info({ signal }, 'shutting down')
      // Written now rather than when the buffer fills: a stop that the deadline ends with SIGKILL loses
      // what is still buffered, and this line says when the stop began.
      void flushLog(logger)
      exitByDeadline(shutdownDeadlineMs(config))
      grace.close()
    } else if (signal === 'SIGINT' && performance.now() - stoppingSince > SAME_STOP_MS) {
      logger.error({ signal }, 'second SIGINT, exiting')
      process.exit(1)
    } else {
      logger.info({ signal }, 'already shutting down')
    }
  }
  // A cluster worker stops when its primary says so, with SIGTERM, and ignores the others (src/cli/serve.cli.ts).
  for (const signal of worker ? (['SIGTERM'] as const) : STOP_SIGNALS) process.on(signal, onStop)
  // With TLS, SIGHUP reloads the certificate (startServer); a worker's primary answers it (src/process/workers.ts).
  if (config.tls === undefined && !worker) process.on('SIGHUP', () => logger.info('SIGHUP: no TLS certificate to reload; still serving'))
}

/**
 * Kills the process with SIGKILL `ms` from now, from a thread of its own: the shutdown's own timer
 * cannot fire while the main thread is blocked (a synchronous call that never returns, a busy loop).
 */
function exitByDeadline(ms: number): void {
  const watchdog = new Worker(
    `const { workerData } = require('node:worker_threads')
     setTimeout(() => process.kill(workerData.pid, 'SIGKILL'), workerData.ms)`,
    { eval: true, workerData: { pid: process.pid, ms } },
  )
  watchdog.unref()
}

/**
 * `npm start` and `npx petstore serve` run the server under a shell of npm's; a `kill` of npm ends npm
 * and that shell, not the server, which would keep its ports with nobody to stop it. So a server that
 * npm started sends itself SIGTERM, and shuts down as on any SIGTERM, once the process that started
 * it is gone (it is then adopted by another), or once npm, that shell's parent, is: npm passes SIGTERM
 * and SIGINT on to its shell, but dies of a SIGHUP or SIGKILL alone, and the shell then outlives it.
 * Started any other way (systemd, a container, `nohup`), it outlives its parent as a daemon should.
 */
export function stopWithNpm(env: Readonly<Record<string, string | undefined>>, logger: Logger): void {
  if (env.npm_command === undefined && env.npm_lifecycle_event === undefined) return
  const parent = process.ppid
  const npm = shellParent(parent)
  const watch = setInterval(() => {
    if (process.ppid === parent && (npm === undefined || !gone(npm))) return
    clearInterval(watch)
    logger.info({ parent }, 'npm, which started this server, has exited')
    process.kill(process.pid, 'SIGTERM')
  }, 500)
  watch.unref()
}

/** The parent of `pid`, with its start time, when `pid` is a shell; undefined otherwise, or without /proc. */
function shellParent(pid: number): { pid: number; started: string } | undefined {
  const shell = processStat(pid)
  if (typeof shell !== 'object' || !['sh', 'dash', 'bash'].includes(shell.name)) return undefined
  const grandparent = processStat(shell.parent)
  return typeof grandparent === 'object' ? { pid: shell.parent, started: grandparent.started } : undefined
}

/** Whether `watched` has ended: its pid is gone, or another process, started at another time, has it now. */
function gone(watched: { pid: number; started: string }): boolean {
  const now = processStat(watched.pid)
  return now === 'gone' || (now !== undefined && now.started !== watched.started)
}

/**
 * What /proc/<pid>/stat says of a process: its name, its parent, and its start time, which a pid reused
 * by another process does not share. `gone` when there is no such process; undefined when it cannot be
 * read (no /proc, descriptors run out), which tells nothing.
 */
function processStat(pid: number): { name: string; parent: number; started: string } | 'gone' | undefined {
  let text: string
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === 'ENOENT' || code === 'ESRCH' ? (fs.existsSync('/proc/self/stat') ? 'gone' : undefined) : undefined
  }
  // The name is in parentheses and may hold spaces and parentheses itself: the fields follow the last `)`.
  const close = text.lastIndexOf(')')
  const fields = text.slice(close + 2).split(' ')
  return { name: text.slice(text.indexOf('(') + 1, close), parent: Number(fields[1]), started: fields[19] ?? '' }
}
