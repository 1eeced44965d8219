import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import pg from 'pg'
import { PrimaryUnavailable } from '../../src/storage/postgres/errors.js'
import { createReplicaSet } from '../../src/storage/postgres/replica-set.js'
import { standbyServers } from '../helper.js'

// The replica set's own rules (src/storage/postgres/replica-set.ts), on the synchronous standby test/run.ts starts.

const servers = standbyServers()

/** The `postgres` database on the cluster's server of `port`. */
function urlOn(port: number | undefined): string {
  const url = new URL(servers?.primaryUrl ?? '')
  url.port = String(port)
  return url.href
}

describe('a replica set whose primary came back while its polls wait', { skip: servers === undefined && 'the standbys are not started in this run' }, () => {
  it('asks the primary for a page whose cursor is past every standby, though it holds the primary down, and refuses one no primary answers', async (t) => {
    const [primaryPort, standbyPort] = servers?.ports ?? []
    const primary = new pg.Pool({ connectionString: urlOn(primaryPort), max: 2 })
    // The primary's polls wait, as they do behind a pool whose connections all hold creates waiting for a
    // synchronous standby that is reconnecting; its other queries are answered.
    let pollsWait = false
    const polled = {
      query: (text: unknown, ...rest: unknown[]) =>
        pollsWait && typeof text === 'string' ? new Promise(() => {}) : (primary.query as (...args: unknown[]) => unknown)(text, ...rest),
    } as unknown as pg.Pool
    const pools: pg.Pool[] = []
    const set = createReplicaSet(polled, [urlOn(standbyPort)], 300, (url) => {
      const pool = new pg.Pool({ connectionString: url, max: 2 })
      pools.push(pool)
      return pool
    })
    const standby = new pg.Client({ connectionString: urlOn(standbyPort) })
    await standby.connect()
    t.after(async () => {
      await standby.query('SELECT pg_wal_replay_resume()')
      await standby.end()
      await set.close()
      await primary.end()
    })
    for (let i = 0; !set.readable(); i++) {
      assert.ok(i < 100, `the standby never became usable: ${JSON.stringify(set.stats().replicas)}`)
      await sleep(50)
    }
    // The standby falls behind a position the primary has flushed: its replay paused, a commit made.
    await standby.query('SELECT pg_wal_replay_pause()')
    await primary.query('SELECT txid_current()')
    const [row] = (await primary.query<{ at: string }>("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text AS at")).rows
    const atLeast = BigInt(row?.at ?? '0')
    const [replayed] = (await standby.query<{ at: string }>("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::text AS at")).rows
    assert.ok(BigInt(replayed?.at ?? '0') < atLeast, `the paused standby replayed ${replayed?.at}, past ${atLeast}`)
    // The set holds the primary down: a key lookup failed there as an outage does (and no standby could
    // answer it), and no poll answers since.
    pollsWait = true
    await sleep(300)
    const outage = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })
    const failOnPrimary = async (_on: pg.Pool, from: 'primary' | 'replica') => {
      if (from === 'primary') throw outage
      return from
    }
    await assert.rejects(set.read({ kind: 'key', first: 'primary' }, failOnPrimary), (error) => error === outage)

    const page = { kind: 'page', first: 'replica', atLeast, stands: () => false } as const
    assert.equal(await set.read(page, async (_on, from) => from), 'primary')
    // A primary that does not answer: the page is refused, as the service answers 503.
    await assert.rejects(set.read(page, failOnPrimary), (error) => error === outage || error instanceof PrimaryUnavailable)
    // A cursor a standby has reached is that standby's to answer, the primary held down.
    const reached = { ...page, atLeast: 0n, stands: () => true }
    assert.equal(await set.read(reached, async (_on, from) => from), 'replica')
  })
})
