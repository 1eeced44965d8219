#!/usr/bin/env node
import { serveNodeOptions, unsupportedNode } from '../dist/runtime.js'

// Before anything native is loaded: better-sqlite3 13 crashes Node 20 instead of failing to load.
const unsupported = unsupportedNode(process.versions.node)
if (unsupported !== undefined) {
  process.stderr.write(`${unsupported}\n`)
  process.exit(1)
}

// The young generation's size can only be set when Node starts, so `serve` restarts itself in place
// (same pid, same signals) with it, however it was launched: `npm start`, `npx petstore`, `node bin/petstore.js`.
const args = process.argv.slice(2)
const options = args[0] === 'serve' ? serveNodeOptions(process.execArgv, process.env.NODE_OPTIONS) : undefined
if (options !== undefined && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, ...options, ...process.execArgv, ...process.argv.slice(1)], process.env)
}

const { main } = await import('../dist/cli.js')
const outcome = await main(args, {
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  interactive: process.stderr.isTTY,
})
if (outcome !== 'serving') process.exitCode = outcome
