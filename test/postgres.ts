/** The PostgreSQL server the tests use, if any: `npm run test:unit` always provides one. */
export const TEST_POSTGRES_URL = process.env.PETSTORE_TEST_DATABASE_URL

export { type EmbeddedServer, createPostgresDatabase, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'

