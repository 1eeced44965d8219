import type { FastifyBaseLogger } from 'fastify'
import pino, { type Bindings, type ChildLoggerOptions, type DestinationStream, type LogFn, type Logger } from 'pino'
import { redactKeys } from './api-keys/api-keys.format.js'
import type { Config } from './config.js'

/**
 * JSON logs. Credentials are redacted wherever a header object is logged, and anything shaped like an
 * API key is redacted from every line, whatever field carries it (a key pasted into a path ends up in
 * the request line's `path`, a key in a body field in an error message). Without a destination,
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

/**
 * `request.log`: pino's child logger with the request id, made only when something logs through it.
 * Fastify asks for one per request, and a pino child serialises its bindings when it is made; but a
 * request that goes well logs only its request line, which app.ts writes through the root logger with
 * the same `reqId`, so for most requests the child is never needed.
 */
class LazyChildLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  #real(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options))
  }

  get level(): string {
    return (this.#child ?? this.#parent).level
  }
  set level(level: string) {
    this.#real().level = level
  }
  fatal(...args: Parameters<LogFn>): void {
    this.#real().fatal(...args)
  }
  error(...args: Parameters<LogFn>): void {
    this.#real().error(...args)
  }
  warn(...args: Parameters<LogFn>): void {
    this.#real().warn(...args)
  }
  info(...args: Parameters<LogFn>): void {
    this.#real().info(...args)
  }
  debug(...args: Parameters<LogFn>): void {
    this.#real().debug(...args)
  }
  trace(...args: Parameters<LogFn>): void {
    this.#real().trace(...args)
  }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: see LazyChildLogger. */
export function lazyChildLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(parent, bindings, options)
}
