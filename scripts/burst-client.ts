// A burst of connections as a client fleet makes one: thousands opened at the same instant, each
// sending its request again on every answer. Used by scripts/burst.ts and test/process/burst.test.ts.
import net from 'node:net'

/** One connection of a burst; times from `performance.now()`. */
export interface Connection {
  openedAt: number
  connectedAt?: number
  firstAnswerAt?: number
  firstStatus?: number
  answers: number
  error?: string
}

/**
 * The status of each complete HTTP/1.1 response at the head of `buffer`, and what is left of it. Every
 * answer of the service carries Content-Length.
 */
function takeResponses(buffer: Buffer): { statuses: number[]; rest: Buffer } {
  const statuses: number[] = []
  let rest = buffer
  for (;;) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) break
    const head = rest.toString('latin1', 0, end)
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0)
    if (rest.length < end + 4 + length) break
    statuses.push(Number(head.slice(9, 12)))
    rest = rest.subarray(end + 4 + length)
  }
  return { statuses, rest }
}

/**
 * Opens `count` connections to 127.0.0.1:`port` at once; each sends `request` again on every answer
 * until `stopAt`, and gives up on its first answer `answerWithinMs` after it was opened.
 */
export function burst(port: number, request: string, count: number, stopAt: number, answerWithinMs: number, signal?: AbortSignal): Promise<Connection[]> {
  const connections: Connection[] = []
  const sockets: net.Socket[] = []
  return new Promise((resolve) => {
    let open = count
    const closed = () => {
      open -= 1
      if (open === 0) resolve(connections)
    }
    for (let i = 0; i < count; i++) {
      const connection: Connection = { openedAt: performance.now(), answers: 0 }
      connections.push(connection)
      const socket = net.connect({ port, host: '127.0.0.1', noDelay: true })
      sockets.push(socket)
      let pending: Buffer = Buffer.alloc(0)
      socket.on('connect', () => {
        connection.connectedAt = performance.now()
        socket.write(request)
      })
      socket.on('data', (chunk: Buffer) => {
        const { statuses, rest } = takeResponses(pending.length === 0 ? chunk : Buffer.concat([pending, chunk]))
        pending = rest
        for (const status of statuses) {
          connection.answers += 1
          if (connection.firstAnswerAt === undefined) {
            connection.firstAnswerAt = performance.now()
            connection.firstStatus = status
          }
        }
        if (statuses.length === 0) return
        if (performance.now() < stopAt) socket.write(request)
        else socket.end()
      })
      socket.on('error', (error: NodeJS.ErrnoException) => (connection.error ??= error.code ?? error.message))
      socket.on('close', closed)
      // Unanswered at the deadline: given up, as a client with a 10 s timeout would.
      const deadline = setTimeout(() => socket.destroy(), Math.max(stopAt - performance.now(), 0) + answerWithinMs)
      socket.on('close', () => clearTimeout(deadline))
    }
    signal?.addEventListener('abort', () => sockets.forEach((socket) => socket.destroy()), { once: true })
  })
}
