import fs from 'node:fs'
import path from 'node:path'
import { after } from 'node:test'

/*
 * Loaded by test/run.ts into each test file's process (node --test sets NODE_TEST_CONTEXT there, and not
 * in the runner): once a file's tests have ended, its process must end too, or Node waits on it for ever
 * and reports no later file. If something the file started still holds the process LINGER_MS after its
 * tests, this names what, kills the processes it started and exits 1, so the file fails and says why.
 * Node's --test-force-exit would end it at once, but may drop the tail of the file's results (nodejs/node#64833).
 */
const LINGER_MS = Number(process.env.PETSTORE_TEST_LINGER_MS ?? 60_000)

/** The pids of this process's children (Linux); a thread that ended meanwhile has none. */
function children(): number[] {
  const tasks = `/proc/${process.pid}/task`
  if (!fs.existsSync(tasks)) return []
  const of = (task: string) => {
    try {
      return fs.readFileSync(path.join(tasks, task, 'children'), 'utf8').trim().split(/\s+/)
    } catch {
      return []
    }
  }
  return fs
    .readdirSync(tasks)
    .flatMap(of)
    .filter((pid) => pid !== '')
    .map(Number)
}

if (process.env.NODE_TEST_CONTEXT !== undefined) {
  after(() => {
    setTimeout(() => {
      const file = path.relative(process.cwd(), process.argv[1] ?? '')
      const pids = children()
      const held = process.getActiveResourcesInfo().join(', ')
      process.stderr.write(
        `${file}: its tests ended ${LINGER_MS / 1000} s ago, but the process is still held open by ${held}` +
          `${pids.length === 0 ? '' : `; killing the processes it started, ${pids.join(', ')}`}.\n`,
      )
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // Gone meanwhile.
        }
      }
      process.exit(1)
    }, LINGER_MS).unref()
  })
}
