import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import { Registry } from 'prom-client'
import type { Config } from '../config.js'
import { flushLog } from '../logger.js'
import { clusterReadiness, clusterSource, startMetricsListener } from './operations-listener.js'
import { connectionCaps, createShedding, descriptorLimit } from './descriptors.js'
import { STOP_SIGNALS, shutdownDeadlineMs } from './drain.js'
import { openMigratedStorage } from '../repositories.js'

/**
 * The primary of `serve --workers N`: applies migrations once, then forks N workers that share
 * the listening port (node:cluster). A worker that dies while serving is replaced; one that dies
 * before it listens stops the whole service, since a replacement would fail the same way (unless SIGHUP
 * ended it: one sent to the group reaches a worker before it can handle it). On
 * any of STOP_SIGNALS every worker shuts down gracefully; the primary exits 0 when all did.
 * The primary serves `GET /metrics`, summed over the workers, which open no metrics listener.
 */
export async function runPrimary(config: Config, logger: Logger, count: number): Promise<void> {
  const { storage, applied } = await openMigratedStorage(config.database, 'DATABASE_URL', logger)
  await storage.close()
  if (applied.length > 0) logger.info({ migrations: applied }, 'applied migrations')

  const listening = new WeakSet<Worker>()
  // Our own count of the workers alive: cluster.workers keeps a worker that has exited until its IPC
  // channel has also closed, which may come after the 'exit' event, so the last exit could go unseen.
  const alive = new Set<Worker>()
  const fork = () => alive.add(cluster.fork())
  let stopping = false
  let failed = false

  // Before any fork: a chosen metrics port already taken stops the service before a worker starts.
  if (config.metrics !== undefined) {
    const readiness = clusterReadiness(
      () => [...alive].filter((worker) => listening.has(worker)),
      () => stopping,
    )
    // The primary holds only the metrics port's connections; what it refuses is logged, and counted in a
    // registry of its own, which the workers' summed figures do not include.
    const caps = connectionCaps(descriptorLimit() ?? Number.POSITIVE_INFINITY)
    const shedding = createShedding(new Registry(), logger)
    await startMetricsListener(config.metrics, clusterSource(), logger, readiness, { timeouts: config.timeouts, maxConnections: caps.operations, shedding })
  }

  const stopAll = () => {
    stopping = true
    for (const worker of alive) worker.process.kill('SIGTERM')
    // Workers end themselves by the same deadline if stuck (src/process/server.ts): this only guards
    // against one that still lives.
    setTimeout(() => {
      logger.error('workers did not stop in time')
      for (const worker of alive) worker.process.kill('SIGKILL')
      process.exit(1)
    }, shutdownDeadlineMs(config)).unref()
  }

  cluster.on('listening', (worker) => listening.add(worker))
  // The workers share one listening socket, which the primary closes once the last worker stops
  // listening, resetting the connections it has accepted and not yet handed over. A worker that
  // closed its connections while another still listened would send its clients to that queue.
  const stoppedListening = new WeakSet<Worker>()
  const releaseWhenNoneListens = () => {
    if ([...alive].some((worker) => listening.has(worker) && !stoppedListening.has(worker))) return
    // A worker that exits meanwhile has lost its channel (EPIPE): there is nothing left to tell it, and
    // without a callback the failure would be an unhandled 'error' that ends the primary.
    for (const worker of alive) if (worker.isConnected()) worker.send(ALL_STOPPED_LISTENING, ignoreSendError)
  }
  cluster.on('message', (worker, message) => {
    if (message !== STOPPED_LISTENING) return
    stoppedListening.add(worker)
    // A worker stopping alone (not a shutdown of the whole service) leaves the others listening.
    if (stopping) releaseWhenNoneListens()
    else worker.send(ALL_STOPPED_LISTENING, ignoreSendError)
  })
  cluster.on('exit', (worker, code, signal) => {
    alive.delete(worker)
    if (stopping) releaseWhenNoneListens()
    const clean = code === 0 && signal === null
    if (!stopping) {
      logger.error({ pid: worker.process.pid, code, signal }, 'worker exited')
      // A worker still loading has no handler yet: a SIGHUP sent to the whole group (a terminal that
      // closes) ends it, where it would have ended none that serves. It failed nothing of its own.
      if (listening.has(worker) || signal === 'SIGHUP') {
        fork()
      } else {
        failed = true
        stopAll()
      }
    } else if (!clean && listening.has(worker)) {
      // One still starting has nothing to drain: the stop's SIGTERM ends it before it handles signals.
      failed = true
    }
    if (stopping && alive.size === 0) {
      logger.info('all workers stopped')
      void flushLog(logger).then(() => process.exit(failed ? 1 : 0))
    }
  })
  // Each worker serves TLS with its own copy of the certificate and watches its files; SIGHUP, sent to
  // the primary (systemd's ExecReload, an operator's kill -HUP), would otherwise end it and the service.
  // Passed on as a message, which a worker still starting ignores (it reads the files itself) where a
  // signal would end it.
  process.on('SIGHUP', () => {
    if (config.tls === undefined) logger.info('SIGHUP: no TLS certificate to reload; still serving')
    else for (const worker of alive) if (worker.isConnected()) worker.send(HANGUP, ignoreSendError)
  })
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (!stopping) {
        logger.info({ signal }, 'shutting down workers')
        stopAll()
      }
    })
  }

  logger.info({ workers: count }, 'starting workers')
  for (let i = 0; i < count; i++) fork()
}

export const isWorker = (): boolean => cluster.isWorker

const ignoreSendError = (): void => {}

const STOPPED_LISTENING = 'petstore:stopped-listening'
const HANGUP = 'petstore:hangup'

/**
 * Calls `listener` on each SIGHUP the service is sent: in a cluster worker, when its primary passes one
 * on (a worker ignores the signal itself, src/cli/serve.cli.ts); otherwise on the signal. Returns the
 * unsubscription.
 */
export function onHangup(listener: () => void): () => void {
  if (!cluster.isWorker) {
    process.on('SIGHUP', listener)
    return () => process.off('SIGHUP', listener)
  }
  const onMessage = (message: unknown) => {
    if (message === HANGUP) listener()
  }
  process.on('message', onMessage)
  return () => process.off('message', onMessage)
}
const ALL_STOPPED_LISTENING = 'petstore:all-stopped-listening'

/**
 * In a worker that has stopped listening: resolves once no worker of the service listens any more
 * (so that the shared listening socket is closed), or after `boundMs` if the primary does not say so.
 */
export function noWorkerListening(boundMs: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      process.off('message', onMessage)
      resolve()
    }
    const onMessage = (message: unknown) => {
      if (message === ALL_STOPPED_LISTENING) done()
    }
    const timer = setTimeout(done, boundMs)
    process.on('message', onMessage)
    process.send?.(STOPPED_LISTENING)
  })
}
