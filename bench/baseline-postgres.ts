// The PostgreSQL run's baselines: the shared bare node:http front (baseline-http.ts) on the service's own
// tables (postgres-store.ts: the SQL and the pool). BENCH_DRIVER picks the driver: `pg` (node-postgres,
// what the service uses) or `postgres` (postgres.js).
// Compiled to plain JavaScript and run without a loader by bench/setup.ts.
// Env: PORT, BENCH_KEY, BENCH_DATABASE_URL, BENCH_DRIVER.
import { required, serveBaseline } from './baseline-http.js'
import { POOL_SIZE, nodePostgresStore, postgresJsStore } from './postgres-store.js'

const driver = required('BENCH_DRIVER')
const url = required('BENCH_DATABASE_URL')
if (driver !== 'pg' && driver !== 'postgres') throw new Error(`baseline: BENCH_DRIVER must be pg or postgres, got "${driver}"`)
const { store, end } = driver === 'pg' ? nodePostgresStore(url) : postgresJsStore(url)
serveBaseline(store, `PostgreSQL through ${driver === 'pg' ? 'node-postgres' : 'postgres.js'}, a pool of ${POOL_SIZE}`, end)
