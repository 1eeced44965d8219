import pino, { type DestinationStream, type Logger } from 'pino'
import { redactKeys } from './api-keys/api-keys.format.js'
import type { Config } from './config.js'

/**
 * JSON logs. Credentials are redacted wherever a header object is logged, and anything shaped like an
 * API key, in any encoding (api-keys.format.ts), is redacted from every line, whatever field carries it
 * (a key pasted into a path ends up in the request line's `path`, a key in a body field in an error message). Without a destination,
 * lines go to stdout asynchronously: a synchronous write per request line costs more than a
 * cached read. pino flushes what is buffered when the process exits; only a kill -9 can lose the
 * last lines.
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
    destination ?? pino.destination({ dest: 1, sync: false }),
  )
}
