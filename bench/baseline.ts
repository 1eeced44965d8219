// The SQLite run's baseline: the pets in memory (memory-store.ts) behind the shared bare node:http
// front (baseline-http.ts). Its throughput is the limit of Node on this machine. Compiled to plain
// JavaScript and run without a loader by bench/setup.ts.
// Env: PORT, BENCH_KEY (the one key it accepts), BENCH_PETS_FILE (JSON array of the seeded pets).
import { required, serveBaseline } from './baseline-http.js'
import { loadMemoryStore } from './memory-store.js'

const store = loadMemoryStore(required('BENCH_PETS_FILE'))
serveBaseline(store, `${store.size} pets in memory`)
