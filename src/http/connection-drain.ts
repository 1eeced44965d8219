import type { Server, ServerResponse } from 'node:http'
import net, { type Socket } from 'node:net'

/** How often the connections are looked at once the listener is closed. */
const CHECK_INTERVAL_MS = 25

/** Connections followed before the first sweep of closed ones. */
const SWEEP_MIN = 64

interface ConnectionState {
  /** Requests read and not yet answered. */
  answering: Set<ServerResponse>
  /** `socket.bytesRead` when the connection was last seen to make progress. */
  bytesSeen: number
  /** When that was: accepted, a byte read, or an answer finished. */
  quietSince: number
}

/** The connections of one HTTP server, followed so that shutdown can close each at a safe moment. */
export interface ConnectionDrain {
  /** Stops accepting connections; those already accepted are served as before, kept alive. */
  stopAccepting(): void
  /**
   * From now on every answer says `Connection: close` and its connection closes after it, and a
   * connection with no request in progress is closed once it has sent nothing for `quietMs`.
   * Resolves when every connection is closed. Call after `stopAccepting`.
   */
  closeConnections(quietMs: number): Promise<void>
}

/**
 * Follows every connection of `server` from now on. Call before it listens.
 *
 * Node's `server.close()` (and Fastify's close, which calls it) destroys every connection without
 * a request in progress at once. That includes a connection accepted a moment ago whose request is
 * already in the kernel's buffer, unread: the kernel answers those bytes with a reset, and the
 * client cannot know whether its request was carried out. Go's `http.Server.Shutdown` is the
 * model here: a connection that has sent nothing yet is given time to send its request.
 */
export function followConnections(server: Server, now: () => number = () => performance.now()): ConnectionDrain {
  const connections = new Map<Socket, ConnectionState>()
  let closing = false
  // Over TLS (src/http/tls.ts) requests arrive on the TLS socket that wraps the TCP one: that is the one to follow.
  // Closed connections are dropped when the map has doubled since it was last swept, not by a 'close'
  // listener: with a listener of ours on each socket (Node adds and removes one of its own per request),
  // about a sixth of everything a request allocates survived each young-generation collection
  // (--trace-gc-nvp under load: 600 KB promoted per scavenge instead of 6 KB), and GC cost a request
  // several times more.
  let sweepAt = SWEEP_MIN
  server.on('setSecureContext' in server ? 'secureConnection' : 'connection', (socket: Socket) => {
    connections.set(socket, { answering: new Set(), bytesSeen: 0, quietSince: now() })
    if (connections.size < sweepAt) return
    for (const known of connections.keys()) if (known.destroyed) connections.delete(known)
    sweepAt = Math.max(SWEEP_MIN, 2 * connections.size)
  })
  server.on('request', (request, response) => {
    const state = connections.get(request.socket)
    if (state === undefined) return
    if (closing) response.setHeader('connection', 'close')
    state.answering.add(response)
    response.once('close', () => {
      state.answering.delete(response)
      state.bytesSeen = request.socket.bytesRead
      state.quietSince = now()
    })
  })

  const closeQuiet = (quietMs: number): void => {
    const at = now()
    for (const [socket, state] of connections) {
      if (socket.destroyed) {
        connections.delete(socket)
        continue
      }
      // bytesRead counts what Node has read from the kernel, parsed into a request yet or not.
      if (state.answering.size > 0 || socket.bytesRead !== state.bytesSeen) {
        state.bytesSeen = socket.bytesRead
        state.quietSince = at
      } else if (at - state.quietSince >= quietMs) {
        socket.destroy()
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
      closing = true
      for (const { answering } of connections.values()) {
        for (const response of answering) if (!response.headersSent) response.setHeader('connection', 'close')
      }
      // Checked after the event loop's poll phase, which reads whatever the kernel holds by then:
      // a request that has arrived is seen as progress rather than destroyed unread.
      const check = setInterval(() => setImmediate(closeQuiet, quietMs), CHECK_INTERVAL_MS)
      try {
        await allClosed
      } finally {
        clearInterval(check)
      }
    },
  }
}
