import { clusterUnavailable } from '../scripts/pg-cluster.js'

export { type EmbeddedServer, createPostgresDatabase, startEmbeddedPostgres } from '../scripts/embedded-postgres.js'

/** The PostgreSQL server the tests use, if any: `npm run test:unit` provides one unless PETSTORE_TEST_POSTGRES=off. */
export const TEST_POSTGRES_URL = process.env.PETSTORE_TEST_DATABASE_URL

/**
 * Why the tests of PostgreSQL behind a pooler (standbys, switchovers, a fleet) cannot run here, or false.
 * They test PostgreSQL's side and run the same on every Node line, so CI runs them on one line only
 * (README, Tests).
 */
export const POOLER_SKIP: string | false = poolerOff() ?? clusterUnavailable() ?? false

/**
 * `PETSTORE_TEST_POSTGRES=off` when the tests run on SQLite only: PostgreSQL's side, the driver pure
 * JavaScript over Node's sockets, runs the same on every Node line, so CI runs it on one (README, Tests);
 * SQLite's driver is compiled for each. Else undefined.
 */
export function postgresOff(): string | undefined {
  return process.env.PETSTORE_TEST_POSTGRES === 'off' ? 'PETSTORE_TEST_POSTGRES=off' : undefined
}

/** `PETSTORE_TEST_POOLER=off` (or no PostgreSQL at all) when that leaves the pooler's tests out, else undefined. */
export function poolerOff(): string | undefined {
  return postgresOff() ?? (process.env.PETSTORE_TEST_POOLER === 'off' ? 'PETSTORE_TEST_POOLER=off' : undefined)
}
