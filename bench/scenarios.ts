// What the benchmark measures, shared by the orchestrator (names, targets, the byte-identity check)
// and the load generator (the requests it sends). Every server answers the same routes the same way.

export type ScenarioId = 'list20' | 'list100' | 'getOne' | 'create'

export interface Scenario {
  id: ScenarioId
  /** As printed in the tables. */
  label: string
  method: 'GET' | 'POST'
  /** Fixed path; getOne's is a template whose `{id}` is replaced per request. */
  path: string
  /**
   * Service req/s ÷ floor req/s that the median over rounds must reach on each engine: issue 24's 0.85,
   * raised to 0.90 by issue 42 for SQLite's get one and list 20. Create on SQLite asks less: the floor
   * appends to memory where the service makes a durable write.
   */
  targetFloorRatio: { sqlite: number; postgres: number }
  /**
   * Where judged (issue 42: SQLite's get one and list 20), the most the median over rounds of service CPU
   * per request ÷ floor CPU per request may be; elsewhere that ratio is reported only.
   */
  targetFloorCpuRatio?: { sqlite?: number; postgres?: number }
}

// Order matters: create runs last, so the reads of every scenario see the same 10,000 seeded pets.
export const SCENARIOS: readonly Scenario[] = [
  {
    id: 'list20',
    label: 'GET /v1/pets?limit=20',
    method: 'GET',
    path: '/v1/pets?limit=20',
    targetFloorRatio: { sqlite: 0.9, postgres: 0.85 },
    targetFloorCpuRatio: { sqlite: 1.15 },
  },
  {
    id: 'list100',
    label: 'GET /v1/pets?status=available&limit=100',
    method: 'GET',
    path: '/v1/pets?status=available&limit=100',
    targetFloorRatio: { sqlite: 0.85, postgres: 0.85 },
  },
  {
    id: 'getOne',
    label: 'GET /v1/pets/{id}',
    method: 'GET',
    path: '/v1/pets/{id}',
    targetFloorRatio: { sqlite: 0.9, postgres: 0.85 },
    targetFloorCpuRatio: { sqlite: 1.15 },
  },
  { id: 'create', label: 'POST /v1/pets', method: 'POST', path: '/v1/pets', targetFloorRatio: { sqlite: 0.7, postgres: 0.85 } },
]

/** Connections of every load-generator run, on both servers. */
export const CONNECTIONS = 50

/**
 * On every scenario and both engines: the service's p99 at most this many times the floor's p99 of the
 * same round (median over rounds); issue 42, where issue 24 allowed 2. The other target on every scenario
 * has no constant: service peak RSS ≤ the floor's.
 */
export const P99_FACTOR = 1.5

const PET_STATUSES = ['available', 'pending', 'sold'] as const

/**
 * A valid createPet body, varied: statuses in turn (every fourth pet has none), 50 categories, and
 * names that need JSON escaping or are not ASCII, so both servers' serialisers are really compared.
 */
export function petBody(n: number, prefix: string): string {
  const names = [`${prefix}-${n}`, `Zoë ${prefix} ${n}`, `"${prefix}" ${n}`, `Bär 🐕 ${n}`, `${prefix}\\${n}\ttab`]
  const status = n % 4 === 3 ? undefined : PET_STATUSES[n % 4]
  return JSON.stringify({ name: names[n % names.length], categoryId: 1 + ((n * 7) % 50), status })
}
