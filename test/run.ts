import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { startEmbeddedPostgres } from './postgres.js'

/*
 * Runs the given test files with `node --test`, with a PostgreSQL server for the tests of that
 * engine: the one PETSTORE_TEST_DATABASE_URL names, or else a throwaway embedded server started
 * here for the whole run (so a fresh machine needs no setup) and destroyed afterwards.
 */
const files = process.argv.slice(2)
const given = process.env.PETSTORE_TEST_DATABASE_URL
const embedded = given === undefined || given === '' ? await startEmbeddedPostgres() : undefined
const url = embedded?.url ?? given ?? ''
if (embedded !== undefined) process.stderr.write('Started an embedded PostgreSQL server for the tests.\n')

const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
  env: { ...process.env, PETSTORE_TEST_DATABASE_URL: url },
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
const [code] = (await once(child, 'exit')) as [number | null]
await embedded?.destroy()
process.exit(code ?? 1)
