import { Gauge, type Registry } from 'prom-client'
import type { RepresentationCache } from './pets.representation-cache.js'

/**
 * `petstore_read_cache_bytes`, `petstore_read_cache_entries` and `petstore_read_cache_budget_bytes` in
 * `registry`, read from `cache` at each scrape: what the read cache holds, counted as its budget counts it
 * (entryCost: each answer's whole cost, not its payload), and that budget. Nothing runs per request.
 * Summed over `--workers`, each worker having a cache and a budget of its own.
 */
export function watchReadCache(registry: Registry, cache: Pick<RepresentationCache, 'size'>, budgetBytes: number): void {
  new Gauge({
    name: 'petstore_read_cache_bytes',
    help: 'What the read cache of listPets and getPet answers holds, in bytes of its budget (each answer with its key and bookkeeping).',
    registers: [registry],
    collect() {
      this.set(cache.size().bytes)
    },
  })
  new Gauge({
    name: 'petstore_read_cache_entries',
    help: 'Answers the read cache holds.',
    registers: [registry],
    collect() {
      this.set(cache.size().entries)
    },
  })
  new Gauge({
    name: 'petstore_read_cache_budget_bytes',
    help: 'The most the read cache may hold, in the bytes petstore_read_cache_bytes counts.',
    registers: [registry],
  }).set(budgetBytes)
}
