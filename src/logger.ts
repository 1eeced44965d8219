import pino, { type DestinationStream, type Logger } from 'pino'
import { redactKeys } from './api-keys/api-keys.format.js'
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
    destination ?? asyncDestination(1),
  )
}

/**
 * pino's destination, written asynchronously: a synchronous write per request line costs more than a
 * cached read. pino flushes what is buffered when the process exits; only a kill -9 can lose the last
 * lines. sonic-boom runs in its buffer mode and is handed each line as a Buffer: in its default (string)
 * mode it measures the text still waiting to be written at every line (`Buffer.byteLength` of one
 * growing string), which copies all of it each time.
 */
export function asyncDestination(dest: number | string): ReturnType<typeof pino.destination> {
  const sonic = pino.destination({ dest, sync: false, contentMode: 'buffer' })
  // In buffer mode sonic-boom's write takes Buffers; its types know only the string mode.
  const writeBuffer = sonic.write.bind(sonic) as unknown as (data: Buffer) => boolean
  sonic.write = (line: string) => writeBuffer(Buffer.from(line))
  return sonic
}
