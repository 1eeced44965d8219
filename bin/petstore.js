#!/usr/bin/env node
import { loadConfig, tracingWanted } from '../dist/config.js'
import { serveRestart, unsupportedNode } from '../dist/process/runtime.js'

// Before anything native is loaded: better-sqlite3 13 crashes Node 20 instead of failing to load.
const unsupported = unsupportedNode(process.versions.node)
if (unsupported !== undefined) {
  process.stderr.write(`${unsupported}\n`)
  process.exit(1)
}

// The young generation's size and malloc's arenas can only be set when a process starts, so `serve`
// restarts itself in place (same pid, same signals) with them, however it was launched: `npm start`,
// `npx petstore`, `node bin/petstore.js`.
const args = process.argv.slice(2)
const restart = args[0] === 'serve' ? serveRestart(process.execArgv, process.env) : undefined
if (restart !== undefined && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, ...restart.nodeOptions, ...process.execArgv, ...process.argv.slice(1)], restart.env)
}

// OpenTelemetry's instrumentations must be in place before fastify, pg and node:http are first
// imported, which the CLI does: so tracing starts here, and only when an endpoint is configured
// (docs/decisions/0019-tracing.md). Each `--workers` worker runs this script again, and traces too.
let tracing
if (args[0] === 'serve' && tracingWanted(process.env)) {
  let config
  try {
    config = loadConfig(process.env, process.cwd())
  } catch {
    // The CLI reports the mistake, naming the variable, and exits 1.
  }
  if (config?.tracing !== undefined) {
    const { startTracing } = await import('../dist/tracing/tracing.js')
    tracing = startTracing(config.tracing, { metricsPort: config.metrics?.port })
  }
}

const { main } = await import('../dist/cli.js')
const outcome = await main(args, {
  tracing,
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  interactive: process.stderr.isTTY,
})
if (outcome !== 'serving') process.exitCode = outcome
