import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { describe, it } from 'node:test'
import pino from 'pino'
import { Registry } from 'prom-client'
import { isUnavailable } from '../../src/storage/postgres/errors.js'
import { RESERVED_DESCRIPTORS, connectionCaps, createShedding, descriptorLimit, guardedMemoryUsage } from '../../src/process/descriptors.js'

// The caps each listener gets from the descriptor limit, and what stands in for work an EMFILE stops (issue 39).

function recordingShedding() {
  const lines: { msg: string; refused?: number; shortages?: number }[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number])
      done()
    },
  })
  const registry = new Registry()
  return { shedding: createShedding(registry, pino(stream)), registry, lines }
}

const emfile = (): never => {
  throw Object.assign(new Error('EMFILE: too many open files, uv_resident_set_memory'), { code: 'EMFILE' })
}

describe('descriptors', () => {
  it('reads this process’s descriptor limit', () => {
    const limit = descriptorLimit()
    assert.ok(limit === undefined || (Number.isInteger(limit) && limit > 0), String(limit))
  })

  it('caps both ports together below the limit, keeping the reserve and the pool, the operations port 4 to 64', () => {
    for (const [limit, pool] of [
      [256, 0],
      [256, 10],
      [1_024, 10],
      [65_536, 100],
      [80, 0],
      [130, 10],
    ] as const) {
      const caps = connectionCaps(limit, pool)
      assert.ok(caps.api + caps.operations <= Math.max(2, limit - RESERVED_DESCRIPTORS - pool), `${limit}, ${pool}: ${JSON.stringify(caps)}`)
      assert.ok(caps.api >= 1 && caps.operations >= 1)
      assert.ok(caps.operations <= 64)
    }
    assert.deepEqual(connectionCaps(1_024, 0), { api: 832, operations: 64 })
    assert.deepEqual(connectionCaps(256, 0), { api: 112, operations: 16 })
    assert.equal(connectionCaps(Number.POSITIVE_INFINITY).api, Number.POSITIVE_INFINITY)
  })

  it('answers the memory check without a descriptor: heap figures from V8, the last resident set, the shortage counted', async () => {
    const { shedding, registry } = recordingShedding()
    let fail = false
    const measured = { rss: 123_456, heapTotal: 1, heapUsed: 1, external: 1, arrayBuffers: 1 }
    const original = Object.assign(() => (fail ? emfile() : measured), { rss: () => (fail ? emfile() : measured.rss) })
    const guarded = guardedMemoryUsage(shedding, original)
    assert.deepEqual(guarded(), measured)
    fail = true
    const short = guarded()
    assert.equal(short.rss, 123_456)
    assert.ok(short.heapUsed > 1_000_000, 'the heap used comes from V8')
    assert.equal(guarded.rss(), 123_456)
    const counted = await registry.getSingleMetric('petstore_descriptor_shortages_total')?.get()
    assert.equal(counted?.values.find((value) => value.labels.site === 'memory-check')?.value, 2)
  })

  it('throws on what is not a want of descriptors', () => {
    const { shedding } = recordingShedding()
    const broken = Object.assign(
      () => {
        throw new Error('something else')
      },
      { rss: () => 0 },
    )
    assert.throws(() => guardedMemoryUsage(shedding, broken)(), /something else/)
  })

  it('takes a PostgreSQL connection that cannot get a descriptor for the database unavailable (503), not a fault', () => {
    for (const code of ['EMFILE', 'ENFILE']) assert.ok(isUnavailable(Object.assign(new Error(`connect ${code}`), { code })), code)
  })

  it('logs a run of refusals once per interval, with how many, and counts every one', async () => {
    const { shedding, registry, lines } = recordingShedding()
    for (let i = 0; i < 500; i++) shedding.refused('api', 'cap')
    shedding.refused('operations', 'cap', 7)
    assert.deepEqual(
      lines.map((line) => line.refused),
      [1, 7],
    )
    const counted = await registry.getSingleMetric('petstore_connections_refused_total')?.get()
    const value = (listener: string) => counted?.values.find((one) => one.labels.listener === listener && one.labels.reason === 'cap')?.value
    assert.equal(value('api'), 500)
    assert.equal(value('operations'), 7)
  })
})
