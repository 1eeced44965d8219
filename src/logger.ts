import pino, { type DestinationStream, type Logger } from 'pino'
import type { Config } from './config.js'

/**
 * JSON logs. Credentials are redacted wherever a header object is logged. Without a destination,
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
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  )
}
