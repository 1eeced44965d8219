import os from 'node:os'
import { CONFIG_NAMES, type Config, checkHostsResolve, describeVariable, listenFailure, loadConfig, trustProxyWarning } from '../config.js'
import { clearTextWarning, readCertificatePair } from '../http/tls.js'
import { checkGetPetDeprecatedAt } from '../deprecations/deprecations.policy.js'
import { createLogger } from '../logger.js'
import { releaseVersion } from '../shared/release.js'
import { STOP_SIGNALS } from '../process/drain.js'
import type { RunningServer } from '../process/server.js'
import { type CliIo, table } from './output.js'
import { UsageError, parse } from './usage.js'

export const SERVE_HELP = `Usage: petstore serve [--workers N|auto]

Runs the HTTP service (applying pending migrations first).
  --workers N   N processes sharing the port (node:cluster); auto = one per core. Default 1.

It reads these environment variables:
${table(CONFIG_NAMES.map((name) => ['', name, describeVariable(name)]))}`

/** `--workers`: a whole number from 1 to 256, or `auto` for one per core. */
function parseWorkers(text: string | undefined): number | undefined {
  if (text === undefined) return 1
  if (text === 'auto') return os.availableParallelism()
  return /^[1-9][0-9]{0,2}$/.test(text) && Number(text) <= 256 ? Number(text) : undefined
}

/** A failure to listen on the API port, naming PORT or HOST (see listenFailure); any other failure as it is. */
function namingListenVariable(error: unknown, config: Config): unknown {
  return listenFailure('API', config, { host: 'HOST', port: 'PORT' }, error as NodeJS.ErrnoException) ?? error
}

export async function serveCommand(args: string[], io: CliIo): Promise<'serving'> {
  const { values } = parse('serve', args, { workers: { type: 'string' } })
  const workers = parseWorkers(values.workers)
  if (workers === undefined) {
    throw new UsageError(`--workers must be a number from 1 to 256 or "auto", got "${values.workers}"`, 'serve')
  }
  // SIGHUP never ends the service, even before it serves: a certificate is read as the server starts.
  process.on('SIGHUP', () => {})
  const config = loadConfig(io.env, io.cwd)
  checkGetPetDeprecatedAt(config)
  await checkHostsResolve(config)
  // The server's modules, most of the start-up, load once the configuration holds: a service that cannot
  // start says why at once.
  const [{ isWorker, runPrimary }, { closeOnSignals, startServer, stopWithNpm, waitForPorts }] = await Promise.all([
    import('../process/workers.js'),
    import('../process/server.js'),
  ])
  const logger = createLogger(config)
  if (!isWorker()) logger.info({ version: releaseVersion(), node: process.version }, `petstore ${releaseVersion()} starting`)
  // A cluster worker stops when its primary says so (SIGTERM). A stop signal sent to the group (Ctrl-C's SIGINT)
  // also reaches every worker directly, from the start, and the primary decides; it also passes SIGHUP on
  // (src/process/workers.ts).
  if (isWorker()) for (const signal of STOP_SIGNALS) if (signal !== 'SIGTERM') process.on(signal, () => {})
  if (!isWorker()) {
    stopWithNpm(io.env, logger)
    const clearText = clearTextWarning(config)
    if (clearText !== undefined) logger.warn(clearText)
    const anyProxy = trustProxyWarning(config)
    if (anyProxy !== undefined) logger.warn(anyProxy)
    await waitForPorts(config, logger)
  }
  if (workers > 1 && !isWorker()) {
    // Before any fork: a pair that cannot be served stops the primary, not each worker in turn.
    if (config.tls !== undefined) readCertificatePair(config.tls)
    await runPrimary(config, logger, workers)
    return 'serving'
  }
  // Workers skip migrations: their primary applied them before forking.
  // A stop signal is a drain from the moment the port listens; before, it ends the process (nothing is served yet).
  const listening = (server: RunningServer) => closeOnSignals(server, config, logger, { worker: isWorker() })
  await startServer(config, logger, { migrate: !isWorker(), tracing: io.tracing, listening }).catch((error: unknown) => {
    throw namingListenVariable(error, config)
  })
  return 'serving'
}
