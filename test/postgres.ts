import { clusterUnavailable } from '../scripts/pg-cluster.js'

export { type EmbeddedServer, createPostgresDatabase, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'

/** The PostgreSQL server the tests use, if any: `npm run test:unit` always provides one. */
export const TEST_POSTGRES_URL = process.env.PETSTORE_TEST_DATABASE_URL

/**
 * Why the tests of PostgreSQL behind a pooler (standbys, switchovers, a fleet) cannot run here, or false.
 * They test PostgreSQL's side and run the same on every Node line, so CI runs them on one line only
 * (PETSTORE_TEST_POOLER=off on the others: README, Tests).
 */
export const POOLER_SKIP: string | false = poolerOff() ?? clusterUnavailable() ?? false

/** `PETSTORE_TEST_POOLER=off` when that leaves the pooler's tests out, else undefined. */
export function poolerOff(): string | undefined {
  return process.env.PETSTORE_TEST_POOLER === 'off' ? 'PETSTORE_TEST_POOLER=off' : undefined
}
