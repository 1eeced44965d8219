import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import type net from 'node:net'
import v8 from 'node:v8'
import type { Logger } from 'pino'
import { Counter, type Registry } from 'prom-client'

/*
 * File descriptors are the one resource a client can take from the process without a key: each
 * connection holds one. Running out must be a shed connection, never an ended process (Envoy's overload
 * manager, nginx's worker_connections): each listener has a cap below the process's limit, and what
 * still meets EMFILE or ENFILE (an accept, the memory check, a file, the database) is counted and
 * logged, not thrown.
 */

/**
 * Descriptors kept for all but the connections: stdio, each thread's event loop (main, the probe
 * thread, the shutdown watchdog) and its pipes, the listening sockets (sixteen on the API port, one on
 * the metrics port), SQLite's database, -wal and -shm and a temporary file, the certificate pair while it
 * is read again, Redis, the OTLP exporter, /proc read by the process metrics, with a margin for what
 * opens later (docs/observing.md gives what an idle process holds). A PostgreSQL pool's connections come
 * on top.
 */
export const RESERVED_DESCRIPTORS = 128

/** The operations port serves probes and scrapes: a few connections each, never the API's load. */
const OPERATIONS_SHARE = 8
const OPERATIONS_MIN = 4
const OPERATIONS_MAX = 64

/** The most connections each port holds at once. */
export interface ConnectionCaps {
  api: number
  operations: number
}

/**
 * The caps of the API and operations ports under a descriptor limit of `limit`, keeping
 * RESERVED_DESCRIPTORS and `poolSize` (PostgreSQL's connections) for the rest: the operations port an
 * eighth of what is left (4 to 64), the API port the remainder, at least 1.
 */
export function connectionCaps(limit: number, poolSize = 0): ConnectionCaps {
  const available = Math.max(2, limit - RESERVED_DESCRIPTORS - poolSize)
  const operations = Math.min(OPERATIONS_MAX, Math.max(OPERATIONS_MIN, Math.floor(available / OPERATIONS_SHARE)))
  return { api: Math.max(1, available - operations), operations: Math.min(operations, Math.max(1, available - 1)) }
}

/**
 * This process's soft RLIMIT_NOFILE, which Node raised at start as far as the hard one: from
 * /proc/self/limits on Linux, else from the shell's `ulimit -n`; undefined when neither says (or it
 * is unlimited).
 */
export function descriptorLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))?.[1]
    if (line !== undefined) return line === 'unlimited' ? undefined : Number(line)
  } catch {
    // Not Linux: the shell says.
  }
  try {
    const text = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2_000 }).trim()
    return /^\d+$/.test(text) ? Number(text) : undefined
  } catch {
    return undefined
  }
}

/** Whether `error` says the process (EMFILE) or the system (ENFILE) has no descriptor left. */
export function outOfDescriptors(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'EMFILE' || code === 'ENFILE'
}

/**
 * The places that shed what they could not do for want of a descriptor, beyond the listeners' accepts
 * (counted as refused connections): the memory check, and a scrape's process metrics, which read /proc.
 * The database's own shortages are its unavailability (503, petstore_database_unavailable_total).
 */
type ShortageSite = 'memory-check' | 'scrape'

/** Where refusals and shortages are counted and said. */
export interface Shedding {
  /** A connection closed at once by `listener`: over its cap, or accepted without a descriptor to spare. */
  refused(listener: 'api' | 'operations', reason: 'cap' | 'descriptors', count?: number): void
  /** Something `site` could not do for want of a descriptor; `error` is logged at most once per interval. */
  shortage(site: ShortageSite, error: unknown): void
}

/** A run of refusals or shortages is said in one line per interval, with how many there were. */
const LOG_INTERVAL_MS = 10_000

/**
 * `petstore_connections_refused_total` and `petstore_descriptor_shortages_total` in `registry`, zeroed up
 * front, and lines in `logger`: the first refusal or shortage of a kind at once, then at most one line
 * per LOG_INTERVAL_MS with the number since the last, so that a flood does not become one of log lines.
 */
export function createShedding(registry: Registry, logger: Logger): Shedding {
  const refusals = new Counter({
    name: 'petstore_connections_refused_total',
    help: 'Connections closed at once on arrival, by listener (api, operations) and reason: over the cap, or no descriptor to spare (EMFILE, ENFILE).',
    labelNames: ['listener', 'reason'] as const,
    registers: [registry],
  })
  const shortages = new Counter({
    name: 'petstore_descriptor_shortages_total',
    help: 'Work shed for want of a file descriptor (EMFILE, ENFILE), by where: memory-check (the heap figures kept, the resident set the last read), scrape (answered 500).',
    labelNames: ['site'] as const,
    registers: [registry],
  })
  for (const listener of ['api', 'operations']) for (const reason of ['cap', 'descriptors']) refusals.labels(listener, reason).inc(0)
  const sites: ShortageSite[] = ['memory-check', 'scrape']
  for (const site of sites) shortages.labels(site).inc(0)

  const said = new Map<string, { at: number; unsaid: number }>()
  const say = (kind: string, count: number, line: (since: number) => void) => {
    const now = performance.now()
    const last = said.get(kind)
    if (last !== undefined && now - last.at < LOG_INTERVAL_MS) {
      last.unsaid += count
      return
    }
    line((last?.unsaid ?? 0) + count)
    said.set(kind, { at: now, unsaid: 0 })
  }
  return {
    refused(listener, reason, count = 1) {
      refusals.labels(listener, reason).inc(count)
      say(`${listener}:${reason}`, count, (since) =>
        logger.warn(
          { listener, reason, refused: since },
          reason === 'cap'
            ? `the ${listener} port is at its connection cap: closing new connections at once (${since} since the last line)`
            : `no file descriptor to spare: the ${listener} port closes new connections at once (${since} since the last line)`,
        ),
      )
    },
    shortage(site, error) {
      shortages.labels(site).inc()
      say(site, 1, (since) => logger.warn({ site, err: error, shortages: since }, `no file descriptor to spare: ${site} shed (${since} since the last line)`))
    },
  }
}

/**
 * Closes at once each connection that `server` is handed beyond `cap` open together, counting it, whether
 * the server accepted it or one of its acceptors (acceptors.ts) handed it over: Node's `maxConnections`
 * counts each listening socket's own. An accept that fails for want of a descriptor is counted, not
 * thrown: libuv has already closed what it could not accept.
 */
export function capConnections(server: net.Server, cap: number, shedding: Shedding): void {
  let open = 0
  server.prependListener('connection', (socket: net.Socket) => {
    if (open >= cap) {
      shedding.refused('api', 'cap')
      socket.destroy()
      return
    }
    open++
    socket.once('close', () => open--)
  })
  server.on('error', (error) => {
    if (!outOfDescriptors(error)) throw error
    shedding.refused('api', 'descriptors')
  })
}

/**
 * `memoryUsage` (process.memoryUsage), answering without a descriptor to spare: the resident set is read
 * from /proc through one, and @fastify/under-pressure's timer and the process metrics call it, where an
 * EMFILE thrown ended the process. Short of one, the heap figures come from V8 (which needs none) with the
 * last resident set read, and the shortage is counted. Its `rss()` likewise.
 */
export function guardedMemoryUsage(shedding: Shedding, memoryUsage: NodeJS.MemoryUsageFn = process.memoryUsage): NodeJS.MemoryUsageFn {
  let lastRss = 0
  const rss = (): number => {
    try {
      lastRss = memoryUsage.rss()
    } catch (error) {
      if (!outOfDescriptors(error)) throw error
      shedding.shortage('memory-check', error)
    }
    return lastRss
  }
  const usage = (): NodeJS.MemoryUsage => {
    try {
      const measured = memoryUsage()
      lastRss = measured.rss
      return measured
    } catch (error) {
      if (!outOfDescriptors(error)) throw error
      shedding.shortage('memory-check', error)
      const heap = v8.getHeapStatistics()
      return { rss: lastRss, heapTotal: heap.total_heap_size, heapUsed: heap.used_heap_size, external: heap.external_memory, arrayBuffers: 0 }
    }
  }
  return Object.assign(usage, { rss })
}
