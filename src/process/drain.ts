import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import net, { type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { currentAnswers } from '../http/http-protocol.js'

/**
 * The signals that stop the service gracefully, each as SIGTERM does: drain, the deadline, `shutting down` with
 * the signal. SIGQUIT and SIGUSR2 are among them because close-with-grace, which the process uses for fatal
 * errors, would otherwise close on them without a drain, and a `--workers` primary would die of them at once.
 * SIGINT alone has a second meaning: sent again a second or more later, it exits at once (closeOnSignals).
 */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGUSR2'] as const

/**
 * After the shutdown's budget, the most a process may still take to exit: its main thread, if stuck, is ended
 * then. Half a second, so that a supervisor's stop timeout of the budget and one second covers it.
 */
const SHUTDOWN_GRACE_MS = 500

/**
 * When a stop must have ended: the drain, the shutdown timeout, and one grace. A process exits by it (a
 * `--workers` primary kills the workers still alive), a replacement waits that long for the ports, and a
 * supervisor's stop timeout (systemd's TimeoutStopSec, Kubernetes' terminationGracePeriodSeconds) should cover it.
 */
export function shutdownDeadlineMs(config: { shutdownDrainMs: number; shutdownTimeoutMs: number }): number {
  return config.shutdownDrainMs + config.shutdownTimeoutMs + SHUTDOWN_GRACE_MS
}

/** How often the connections are looked at once the listener is closed. */
const CHECK_INTERVAL_MS = 25

/** Closed connections kept in the list before it is pruned, at the least. */
const PRUNE_MIN = 64

interface ConnectionState {
  /** The answer this module made to say `Connection: close`, while that may still be taken back. */
  closer: ServerResponse | undefined
  /** `socket.bytesRead` at the last look. */
  bytesSeen: number
  /** The first look since which no answer was in progress and no byte was read; undefined while not quiet. */
  quietSince: number | undefined
}

/** One entry of Node's list of an HTTP server's connections: a connection's parser. */
interface ParserEntry {
  socket?: unknown
}

/**
 * Node's own list of an HTTP server's connections (lib/_http_server.js), which it keeps for the
 * headers and request timeouts: `idle()` holds those between requests, `all()` every one. No public
 * API tells a connection part-way through reading a request from an idle one: `closeIdleConnections()`
 * reads this list for that, but destroys the idle ones at once. Undefined before the server listens,
 * or if a version of Node no longer keeps it there.
 */
function connectionsList(server: Server): { all(): ParserEntry[]; idle(): ParserEntry[] } | undefined {
  const key = Object.getOwnPropertySymbols(server).find((symbol) => symbol.description === 'http.server.connections')
  const list = key === undefined ? undefined : (server as unknown as Record<symbol, unknown>)[key]
  if (typeof list !== 'object' || list === null || !('all' in list) || !('idle' in list)) return undefined
  if (typeof list.all !== 'function' || typeof list.idle !== 'function') return undefined
  return list as { all(): ParserEntry[]; idle(): ParserEntry[] }
}

/**
 * The connections of `server` that have read part of a request and not all of it (headers started, or
 * a body still coming). Without Node's list, none: such a connection is then closed once quiet, like
 * an idle one, rather than left to the request limits.
 */
function readingRequests(server: Server): Set<unknown> {
  const list = connectionsList(server)
  if (list === undefined) return new Set()
  const idle = new Set(list.idle().map((entry) => entry.socket))
  return new Set(
    list
      .all()
      .map((entry) => entry.socket)
      // Node 24 lists a connection that has read nothing yet as in a request; Node 26 as idle.
      .filter((socket) => !idle.has(socket) && socket instanceof net.Socket && socket.bytesRead > 0),
  )
}

/**
 * A TCP connection's addresses, which its TLS socket shares: no public API leads from a TLS socket to
 * the TCP socket it wraps. The local address counts, since a client may use one port towards two of the
 * server's addresses.
 */
const addresses = (socket: Socket): string => `${socket.remoteAddress} ${socket.remotePort} ${socket.localAddress}`

/**
 * Makes `response`, a connection's latest answer, the one after which it closes. Only the latest may
 * say so: Node closes a connection after an answer that says `Connection: close`, and would never send
 * the answers to the pipelined requests behind it, already read and carried out.
 */
function closeAfter(state: ConnectionState, response: ServerResponse): void {
  const previous = state.closer
  if (previous !== undefined && previous !== response && !previous.headersSent) previous.removeHeader('connection')
  state.closer = undefined
  if (response.headersSent) return
  response.setHeader('connection', 'close')
  state.closer = response
}

/** The connections of one HTTP server, followed so that shutdown can close each at a safe moment. */
export interface ConnectionDrain {
  /** Stops accepting connections; those already accepted are served as before, kept alive. */
  stopAccepting(): void
  /**
   * From now on each connection's latest answer says `Connection: close` (unless its headers are
   * already sent) and the connection closes after it, and a connection with no answer in progress and
   * no request part-read (a TLS one still in its handshake among them) is closed once it has read
   * nothing for `quietMs`, counted from this call at the earliest. Resolves when every connection is
   * closed. Call after `stopAccepting`.
   */
  closeConnections(quietMs: number): Promise<void>
}

/**
 * Follows every connection of `server`, made by createHttpServer, from now on. Call before it listens.
 *
 * Node's `server.close()` (and Fastify's close, which calls it) destroys every connection without
 * a request in progress at once. That includes a connection accepted a moment ago whose request is
 * already in the kernel's buffer, unread: the kernel answers those bytes with a reset, and the
 * client cannot know whether its request was carried out. Go's `http.Server.Shutdown` is the
 * model here: a connection that has sent nothing yet is given time to send its request.
 *
 * Until shutdown a request costs nothing here: the answer each connection is on is recorded by
 * createHttpServer anyway, and when it finished is not recorded at all. So a connection's quiet time
 * is found out by the looks during shutdown alone: it starts after the answer's end, never before.
 */
export function followConnections(server: Server, now: () => number = () => performance.now()): ConnectionDrain {
  const currentAnswer = currentAnswers(server)
  const connections = new Map<Socket, ConnectionState>()
  // Over TLS, the TCP connections whose handshake has not finished, by their addresses: until it does,
  // no TLS socket is there to follow, and one of them would hold the listener's close until the handshake
  // timeout.
  const handshakes = new Map<string, Socket>()
  let closing = false
  let pruneAt = PRUNE_MIN
  const follow = (socket: Socket): void => {
    connections.set(socket, { closer: undefined, bytesSeen: 0, quietSince: undefined })
    // Closed connections are dropped here, a batch at a time, rather than by a 'close' listener of their
    // own: Node adds and removes one on the socket for every request, and a third would make it
    // allocate a new list of listeners each time.
    if (connections.size < pruneAt) return
    for (const followed of connections.keys()) if (followed.destroyed) connections.delete(followed)
    for (const [key, tcp] of handshakes) if (tcp.destroyed) handshakes.delete(key)
    pruneAt = Math.max(PRUNE_MIN, 2 * connections.size)
  }
  if ('setSecureContext' in server) {
    server.on('connection', (tcp: Socket) => {
      handshakes.set(addresses(tcp), tcp)
      follow(tcp)
    })
    // Requests arrive on the TLS socket that wraps the TCP one (src/http/tls.ts): from now on, that is the one to follow.
    server.on('secureConnection', (socket: Socket) => {
      const key = addresses(socket)
      const tcp = handshakes.get(key)
      if (tcp !== undefined) {
        handshakes.delete(key)
        connections.delete(tcp)
      }
      follow(socket)
    })
  } else {
    server.on('connection', follow)
  }
  const closeAfterRequest = (request: IncomingMessage, response: ServerResponse): void => {
    const state = connections.get(request.socket)
    if (state !== undefined) closeAfter(state, response)
  }

  const closeQuiet = (quietMs: number): void => {
    const at = now()
    const reading = readingRequests(server)
    for (const [socket, state] of connections) {
      if (socket.destroyed) {
        connections.delete(socket)
        continue
      }
      const answer = currentAnswer(socket)
      // bytesRead counts what Node has read from the kernel, parsed into a request yet or not. A request
      // part-read is left to the headers and request timeouts, which answer it 408, or to be served.
      if ((answer !== undefined && !answer.writableFinished) || reading.has(socket) || socket.bytesRead !== state.bytesSeen) {
        state.bytesSeen = socket.bytesRead
        state.quietSince = undefined
      } else {
        state.quietSince ??= at
        if (at - state.quietSince >= quietMs) socket.destroy()
      }
    }
  }

  let allClosed: Promise<void> | undefined
  return {
    stopAccepting() {
      // net's close, not http's: http's would destroy at once every connection it deems idle.
      allClosed ??= new Promise<void>((resolve) => net.Server.prototype.close.call(server, () => resolve()))
    },
    async closeConnections(quietMs) {
      this.stopAccepting()
      if (!closing) {
        closing = true
        // First, so that `Connection: close` is set before any hook can answer.
        server.prependListener('request', closeAfterRequest)
        for (const [socket, state] of connections) {
          const answer = currentAnswer(socket)
          if (answer !== undefined) closeAfter(state, answer)
          state.bytesSeen = socket.bytesRead
        }
      }
      // Checked after the event loop's poll phase, which reads whatever the kernel holds by then:
      // a request that has arrived is seen as progress rather than destroyed unread.
      const check = setInterval(() => setImmediate(closeQuiet, quietMs), CHECK_INTERVAL_MS)
      try {
        await allClosed
        // The server counts only the connections its own socket accepted; those of the other listening
        // sockets (acceptors.ts) are followed here all the same, and waited for.
        while ([...connections.keys()].some((socket) => !socket.destroyed)) await sleep(CHECK_INTERVAL_MS)
      } finally {
        clearInterval(check)
      }
    },
  }
}
