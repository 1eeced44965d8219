#!/usr/bin/env node
import { main } from '../dist/cli.js'

const outcome = await main(process.argv.slice(2), {
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
})
if (outcome !== 'serving') process.exitCode = outcome
