import childProcess from 'node:child_process'
import { syncBuiltinESMExports } from 'node:module'
import path from 'node:path'

/*
 * Loaded by `test/run.ts --fast` into each test file's process (node --test sets NODE_TEST_CONTEXT
 * there, and not in the runner, which must start them): a test that starts a process, whether the
 * service, a browser or Redis, fails here instead of slowing the fast run down unnoticed.
 */
if (process.env.NODE_TEST_CONTEXT !== undefined) {
  const file = path.relative(process.cwd(), process.argv[1] ?? '')
  for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const) {
    const original = childProcess[name] as (...args: unknown[]) => unknown
    const guarded = (command: unknown, ...args: unknown[]): unknown => {
      // tsx compiles the tests with esbuild, which may run its own binary.
      if (typeof command === 'string' && path.basename(command).startsWith('esbuild')) return original(command, ...args)
      throw new Error(`${file} starts a process (${String(command)}): add it to PROCESS_TESTS in test/run.ts, which npm run test:fast leaves out`)
    }
    Object.defineProperty(childProcess, name, { value: guarded, writable: true, configurable: true })
  }
  syncBuiltinESMExports()
}
