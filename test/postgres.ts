import { randomBytes } from 'node:crypto'
import pg from 'pg'

/** The PostgreSQL server the tests use, if any: `npm run test:unit` always provides one. */
export const TEST_POSTGRES_URL = process.env.PETSTORE_TEST_DATABASE_URL

export { type EmbeddedServer, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'

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
