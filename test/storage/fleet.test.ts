import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import {
  DOCUMENTED,
  type FleetDatabase,
  KINDS,
  type PhaseResult,
  SERVER_LIMIT,
  fleetEnv,
  migrate,
  runPhase,
  servingProcesses,
  startFleet,
  startFleetDatabase,
} from '../../scripts/fleet.js'
import { POOLER_SKIP } from '../postgres.js'
import { createKey } from '../../scripts/petstore-process.js'
import { type ServerProcess, cleanupProcesses, startServer, stopServer, trackedTempDir } from '../processes.js'

// A fleet as the issue sizes it (issue 29): 6 instances × `serve --workers 2` through one PgBouncer in
// transaction mode, PostgreSQL at max_connections = 30, under a short mixed load; scripts/fleet.ts runs a
// longer one and measures it against one process. The fleet's pools (12 × DATABASE_POOL_SIZE) far
// outnumber the pooler's SERVER_LIMIT server connections: that is what a pooler is for.

after(cleanupProcesses)

const INSTANCES = 6
const WORKERS = 2

describe('a fleet of 12 processes on one PostgreSQL through PgBouncer in transaction mode', { skip: POOLER_SKIP, timeout: 150_000 }, () => {
  let database: FleetDatabase | undefined
  let fleet: ServerProcess[] = []
  let serving: number[] = []
  let servingAfter: number[] = []
  let phase: PhaseResult

  before(async () => {
    database = await startFleetDatabase(['fleet'])
    const env = fleetEnv(database.pooler.url('fleet'))
    await migrate(env)
    const apiKey = await createKey(env, 'fleet test')
    const dir = trackedTempDir('petstore-fleet-')
    fleet = await startFleet((args) => startServer(env, dir, args), { instances: INSTANCES, workers: WORKERS })
    serving = servingProcesses(fleet, WORKERS)
    phase = await runPhase({
      baseUrls: fleet.map((server) => server.baseUrl),
      apiKey,
      primary: database.primary,
      pooler: database.pooler,
      connections: 48,
      warmupMs: 1_000,
      durationMs: 6_000,
    })
    servingAfter = servingProcesses(fleet, WORKERS)
  })

  after(async () => {
    await Promise.all(fleet.map((server) => stopServer(server, 'SIGTERM', 15_000).catch(() => undefined)))
    await database?.destroy()
  })

  it('serves from at least 12 processes, none of which ends under the load', () => {
    assert.ok(serving.length >= 12, `${serving.length} serving processes`)
    assert.deepEqual(servingAfter, serving)
  })

  it('answers every request with a status its operation documents, and each kind at least once with success', (t) => {
    t.diagnostic([...phase.load.answers].map(([answer, n]) => `${answer}: ${n}`).join(', '))
    const statuses = [...phase.load.answers.keys()]
    for (const answer of statuses) {
      const kind = KINDS.find((name) => answer.startsWith(`${name} `))
      assert.ok(kind !== undefined && DOCUMENTED[kind].map(String).includes(answer.slice(kind.length + 1)), `undocumented: ${answer}`)
    }
    for (const kind of KINDS) assert.ok(statuses.some((answer) => answer.startsWith(`${kind} 20`)), `no ${kind} succeeded: ${statuses.join(', ')}`)
  })

  it('answers a 5xx only as 503 with Retry-After, in the error shape {code, message, status}', () => {
    assert.deepEqual(
      [...phase.load.answers.keys()].filter((answer) => / 5\d\d$/.test(answer) && !answer.endsWith(' 503')),
      [],
    )
    assert.deepEqual(phase.load.problems, [])
  })

  it(`never lets PostgreSQL hold more client connections than the pooler's ${SERVER_LIMIT}, while the fleet holds more than that`, async (t) => {
    const [setting] = (await database?.primary.query<{ max_connections: string }>('SHOW max_connections')) ?? []
    assert.equal(setting?.max_connections, '30')
    const { maxServer, maxPoolerClients, samples } = phase.connections
    t.diagnostic(`PostgreSQL's client connections at most ${maxServer}, the pooler's clients at most ${maxPoolerClients}, in ${samples} samples`)
    assert.deepEqual(phase.connections.failures, [])
    assert.ok(samples >= 5, `only ${samples} samples`)
    assert.ok(maxServer <= SERVER_LIMIT, `PostgreSQL held ${maxServer} client connections`)
    assert.ok(maxPoolerClients > SERVER_LIMIT, `the fleet held only ${maxPoolerClients} connections to the pooler`)
  })

  it('reads back every acknowledged pet as it was acknowledged', () => {
    assert.ok(phase.load.acknowledged.size > 1)
    assert.deepEqual(phase.lost, [])
  })

  it('makes one pet of each keyed create retried with its Idempotency-Key, replaying those acknowledged', () => {
    assert.ok(phase.load.keyed.length > 0)
    assert.deepEqual(phase.retries, [])
    assert.deepEqual(phase.duplicates, [])
  })
})
