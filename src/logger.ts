import fs from 'node:fs'
import pino, { type DestinationStream, type Logger } from 'pino'
import { redactKeys } from './shared/redaction.js'
import type { Config } from './config.js'

/**
 * JSON logs. Credentials are redacted wherever a header object is logged, and anything shaped like an
 * API key, in any encoding (api-keys.format.ts), is redacted from every line, whatever field carries it
 * (a key pasted into a path ends up in the request line's `path`, a key in a body field in an error message).
 * Without a destination, lines go to stdout through `asyncDestination`.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'headers.authorization', 'request.headers.authorization'],
        censor: '[redacted]',
      },
      hooks: { streamWrite: redactKeys },
    },
    destination ?? stdoutDestination(),
  )
}

const { chindingsSym, endSym, hooksSym, lsCacheSym, messageKeySym, streamSym, timeSym } = pino.symbols

/**
 * A writer of info lines of one message, as `logger.info(fields, msg)` would write them (the level, the time,
 * the bindings, the fields and the message, through the same redaction and destination), for the line written
 * at every request: `JSON.stringify` serialises an object of strings and numbers natively, where pino's own
 * path looks up a serializer for each key and escapes each string in JavaScript (bench/findings.md).
 * Nothing is written while the logger's level is above info. The logger's `streamWrite` hook (the redaction)
 * sees the fields, the only part of such a line that holds anything a request sent: the rest is the logger's
 * and `msg`, and the line is written without being copied whole for it.
 */
export function infoLines(logger: Logger, msg: string): (fields: object) => void {
  // pino's parts of a line, on the logger (pino.symbols); typed there only as symbols.
  const parts = logger as unknown as Record<symbol, unknown>
  const levelPart = (parts[lsCacheSym] as Record<number, string>)[logger.levels.values.info as number]
  const time = parts[timeSym] as () => string
  const messagePart = `,${JSON.stringify(parts[messageKeySym])}:${JSON.stringify(msg)}${parts[endSym] as string}`
  const streamWrite = (parts[hooksSym] as { streamWrite?: (line: string) => string }).streamWrite ?? ((line: string) => line)
  return (fields) => {
    if (!logger.isLevelEnabled('info')) return
    const json = streamWrite(JSON.stringify(fields))
    const fieldsPart = json.length > 2 ? `,${json.slice(1, -1)}` : ''
    ;(parts[streamSym] as DestinationStream).write(`${levelPart}${time()}${parts[chindingsSym] as string}${fieldsPart}${messagePart}`)
  }
}

/**
 * stdout, asynchronously. Node opens a pipe or socket it was handed as stdout in non-blocking mode once
 * `process.stdout` is first used: a write to a reader that stopped reading then fails with EAGAIN,
 * retried, instead of blocking one of libuv's threads in write(2), which the process's exit would wait
 * for for ever.
 */
function stdoutDestination(): ReturnType<typeof pino.destination> {
  return asyncDestination(process.stdout.fd)
}

/** How long a flush waits for a log reader that takes nothing before it holds the reader stopped. */
const FLUSH_SYNC_MS = 1_000

/**
 * Resolves once every line logged so far is written, or, through `asyncDestination`, once the reader has
 * taken nothing for FLUSH_SYNC_MS. Called after a process's last words, before it exits: the exit's
 * synchronous flush writes what is buffered at once, while a write already in flight finishes on its own
 * and may land after it (sonic-boom's flushSync), which would put request lines after the last words.
 */
export function flushLog(logger: Pick<Logger, 'flush'>): Promise<void> {
  return new Promise((resolve) => {
    logger.flush(() => resolve())
  })
}

/**
 * pino's destination. The lines of one turn of the event loop are written together as the turn ends
 * (`setImmediate`), with one `write(2)` from the main thread while nothing waits before them; otherwise, and
 * for whatever a write leaves (a full pipe: EAGAIN; a reader gone: EPIPE), sonic-boom takes them on, in order,
 * and writes them in the background on libuv's thread pool. Handed every line, that thread waits for a core
 * under load, and the lines queued meanwhile live into the old generation (bench/findings.md). pino
 * flushes what is buffered when the process exits; only a kill -9 can lose the last lines (of one turn at most,
 * beyond what waits for a slow reader). sonic-boom runs in its buffer mode: in its default (string) mode it
 * measures the text still waiting to be written at every write (`Buffer.byteLength` of one growing string).
 *
 * A flush at exit never blocks for ever, whatever became of the reader: lines it cannot write to a reader
 * that stopped reading (a full pipe that took nothing for FLUSH_SYNC_MS), or at all to one that is gone
 * (EPIPE: `| head`, a logger killed with the process group), are dropped, and the process exits as it
 * meant to. A reader that is slow but reading (one starved of a core) is waited for, within the stop's
 * own bound (src/process/server.ts). Written in the background, a full pipe is waited for as long as the
 * process runs. A pipe given as stdout is non-blocking (stdoutDestination), so the main thread's write
 * returns at once when it is full.
 */
export function asyncDestination(dest: number | string): ReturnType<typeof pino.destination> {
  // While the exit's synchronous flush runs: when the reader last took something, and what was left then.
  let flushingSync: { progressAt: number; left: number } | undefined
  // Set while a flush (flushLog) finds the reader taking nothing for FLUSH_SYNC_MS, until it takes something:
  // the exit's flush then gives up at once.
  let stuck = false
  const sonic = pino.destination({
    dest,
    sync: false,
    contentMode: 'buffer',
    retryEAGAIN: (_error: Error, writing: number, queued: number) => {
      if (flushingSync === undefined) return true
      const now = performance.now()
      if (writing + queued !== flushingSync.left) flushingSync = { progressAt: now, left: writing + queued }
      return !stuck && now - flushingSync.progressAt < FLUSH_SYNC_MS
    },
  })
  // In buffer mode sonic-boom's write takes Buffers; its types know only the string mode.
  const writeBuffer = sonic.write.bind(sonic) as unknown as (data: Buffer) => boolean
  // Its descriptor once open; also missing from its types.
  const fd = () => (sonic as unknown as { fd: number }).fd
  // The lines of this turn, and whether sonic-boom still holds earlier ones (they are written first).
  let turn: string[] = []
  let writingTurn: NodeJS.Immediate | undefined
  let behind = false
  // When the reader last took something written in the background.
  let progressAt = performance.now()
  sonic.on('write', () => {
    progressAt = performance.now()
    stuck = false
  })
  sonic.on('drain', () => {
    behind = false
  })
  const writeTurn = () => {
    clearImmediate(writingTurn)
    writingTurn = undefined
    let data = Buffer.from(turn.join(''))
    turn = []
    // sonic-boom opens a path asynchronously: until then its fd is -1, and it keeps the lines.
    if (!behind && fd() >= 0) {
      let written = 0
      try {
        written = fs.writeSync(fd(), data)
      } catch {
        // EAGAIN (a full pipe) or a failure: sonic-boom retries or reports it, as for every line it writes.
      }
      if (written === data.length) return
      data = data.subarray(written)
    }
    behind = true
    writeBuffer(data)
  }
  sonic.write = (line: string) => {
    writingTurn ??= setImmediate(writeTurn)
    turn.push(line)
    return true
  }
  const flush = sonic.flush.bind(sonic)
  sonic.flush = (callback?: (error?: Error) => void) => {
    if (turn.length > 0) writeTurn()
    let called = false
    let timer: NodeJS.Timeout | undefined
    const done = (error?: Error) => {
      if (called) return
      called = true
      clearTimeout(timer)
      callback?.(error)
    }
    const since = performance.now()
    // Waits while the reader takes something at least every FLUSH_SYNC_MS.
    const check = () => {
      const idle = performance.now() - Math.max(since, progressAt)
      if (idle < FLUSH_SYNC_MS) {
        timer = setTimeout(check, FLUSH_SYNC_MS - idle)
        return
      }
      stuck = true
      done()
    }
    check()
    flush(done)
  }
  const flushSync = sonic.flushSync.bind(sonic)
  sonic.flushSync = () => {
    flushingSync = { progressAt: performance.now(), left: -1 }
    try {
      if (turn.length > 0) writeTurn()
      flushSync()
    } catch {
      // The reader is gone or stopped: nobody can read these lines any more.
    } finally {
      flushingSync = undefined
    }
  }
  return sonic
}
