import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import { openMigratedStorage, openStorage, type Storage } from './storage/storage.js'

export interface RunningServer {
  app: FastifyInstance
  /** Stops accepting, lets in-flight requests finish, then closes the database. */
  close(): Promise<void>
}

/** Opens storage, applies migrations (unless told not to) and listens. */
export async function startServer(
  config: Config,
  logger: Logger,
  { migrate = true }: { migrate?: boolean } = {},
): Promise<RunningServer> {
  let storage: Storage
  if (migrate) {
    const opened = await openMigratedStorage(config.database)
    if (opened.applied.length > 0) logger.info({ migrations: opened.applied }, 'applied migrations')
    storage = opened.storage
  } else {
    storage = await openStorage(config.database)
  }
  const app = await buildApp({ config, storage, logger })
  // A request already in flight when shutdown starts would otherwise leave its keep-alive
  // connection open after the response, and close() would wait for the client to hang up.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close')
  })
  await app.listen({ port: config.port, host: config.host })
  return {
    app,
    async close() {
      await app.close()
      await storage.close()
    },
  }
}

/**
 * On SIGTERM or SIGINT: stop accepting, finish in-flight requests, close the database, exit 0.
 * If that takes longer than the configured timeout, exit 1.
 */
export function closeOnSignals(
  server: RunningServer,
  config: Config,
  logger: Logger,
  { worker = false }: { worker?: boolean } = {},
): void {
  // A cluster worker stops when its primary says so (SIGTERM). Ctrl-C in a terminal also sends
  // SIGINT to every worker directly; obeying both would count as a second signal and exit 1.
  if (worker) process.on('SIGINT', () => {})
  closeWithGrace({ delay: config.shutdownTimeoutMs, logger, skip: worker ? ['SIGINT'] : [] }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'fatal error, shutting down')
    else logger.info({ signal }, 'shutting down')
    await server.close()
    logger.info('shut down cleanly')
  })
}
