import pino, { type DestinationStream, type Logger } from 'pino'
import type { Config } from './config.js'

/** JSON logs. Credentials are redacted wherever a header object is logged. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'headers.authorization', 'request.headers.authorization'],
        censor: '[redacted]',
      },
    },
    destination,
  )
}
