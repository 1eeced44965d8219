import net from 'node:net'

export interface Acceptors {
  /** Stops accepting; the connections they accepted are the server's. */
  close(): void
}

/**
 * Listening sockets on the API port beside the server's own, each handing what it accepts to the
 * server as if the server had accepted it.
 *
 * Node accepts one connection per listening socket and batch of events its loop handles (libuv since
 * 1.45, libuv/libuv#3696), and under load a batch is long: a burst of thousands of new connections
 * would wait in the kernel's queue longer than any client does (ADR 21). The sockets share the port
 * through SO_REUSEPORT, the kernel spreading new connections among them, so the process accepts
 * `count + 1` connections per batch.
 */
export async function openAcceptors(
  server: net.Server,
  options: { host: string; port: number; backlog: number; count: number; acceptFailed: (error: Error) => void },
): Promise<Acceptors> {
  const acceptors: net.Server[] = []
  const handOver = (socket: net.Socket) => server.emit('connection', socket)
  try {
    for (let i = 0; i < options.count; i++) {
      // As Node's HTTP server sets its own (Nagle's delay off).
      const acceptor = net.createServer({ noDelay: true }, handOver)
      acceptors.push(acceptor)
      await new Promise<void>((resolve, reject) => {
        acceptor.once('error', reject)
        acceptor.listen({ host: options.host, port: options.port, backlog: options.backlog, reusePort: true }, resolve)
      })
      // Once listening, an error is a connection that could not be accepted (EMFILE…), not the socket's end.
      acceptor.removeAllListeners('error').on('error', options.acceptFailed)
    }
  } catch (error) {
    for (const acceptor of acceptors) acceptor.close()
    throw error
  }
  return {
    close() {
      for (const acceptor of acceptors) acceptor.close()
    },
  }
}
