import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import pg from 'pg'
import type { Pet, PetsRead } from '../../src/pets/pets.repository.js'
import { insertPostgresPet } from '../../src/pets/pets.repository.postgres.js'
import { ENGINES, type TestApp, buildTestApp } from '../helper.js'

// The page reads of docs/decisions/0015-postgres-read-path.md: a page never shows a pet above a
// hole that a create in flight may still fill, waits only when its own id range has a hole, and
// readers never wait for each other.

/** A second connection to the app's database, ended before the app drops it. */
async function connect(testApp: TestApp, t: { after: (fn: () => Promise<void>) => void }): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: testApp.config.database.engine === 'postgres' ? testApp.config.database.url : '' })
  t.after(async () => {
    await client.end()
    await testApp.close()
  })
  await client.connect()
  return client
}

/** Whether `promise` is still pending after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timeout = Symbol('pending')
  return (await Promise.race([promise.then(() => undefined), sleep(ms, timeout)])) === timeout
}

const ids = (read: PetsRead | Pet[]) => (Array.isArray(read) ? read : read.pets).map((pet) => pet.id)

if (ENGINES.includes('postgres')) {
  describe('postgres page reads with creates in flight', () => {
    it('waits, filtered or not, for a create that drew a lower id instead of showing a later pet above its hole', async (t) => {
      const testApp = await buildTestApp('postgres')
      const slowCreate = await connect(testApp, t)
      const { pets } = testApp.storage
      await slowCreate.query('BEGIN')
      const slow = await insertPostgresPet(slowCreate as unknown as pg.PoolClient, { name: 'Slow', categoryId: 1n, status: 'sold' }, 0)
      const fast = await pets.create({ name: 'Fast', categoryId: 1n, status: 'sold' }, 0)
      assert.ok(fast.id > slow.id)
      const all = pets.list({ limit: 10, afterId: 0n })
      const sold = pets.list({ limit: 10, afterId: 0n, status: 'sold' })
      // Without the wait these answer [fast] at once, and the next page (after fast) would never show slow.
      assert.ok(await pendingAfter(all, 300), 'the unfiltered page did not wait')
      assert.ok(await pendingAfter(sold, 0), 'the filtered page did not wait')
      await slowCreate.query('COMMIT')
      assert.deepEqual(ids(await all), [slow.id, fast.id])
      assert.deepEqual(ids(await sold), [slow.id, fast.id])
    })

    it('answers a page whose ids are all present without waiting for a create in flight above it', async (t) => {
      const testApp = await buildTestApp('postgres')
      const slowCreate = await connect(testApp, t)
      const { pets } = testApp.storage
      const settled: Pet[] = []
      for (const name of ['One', 'Two', 'Three']) settled.push(await pets.create({ name, categoryId: 1n }, 0))
      await slowCreate.query('BEGIN')
      const slow = await insertPostgresPet(slowCreate as unknown as pg.PoolClient, { name: 'Slow', categoryId: 1n }, 0)
      try {
        const page = pets.list({ limit: 10, afterId: 0n })
        assert.equal(await pendingAfter(page, 2_000), false, 'the page waited for a create above it')
        assert.deepEqual(ids(await page), ids(settled))
      } finally {
        await slowCreate.query('COMMIT')
      }
      assert.deepEqual(ids(await pets.list({ limit: 10, afterId: 0n })), [...ids(settled), slow.id])
    })

    it('lets a page that must wait through while another reader holds the lock, and holds creates back meanwhile', async (t) => {
      const testApp = await buildTestApp('postgres')
      const reader = await connect(testApp, t)
      const { pets } = testApp.storage
      // A hole for good: an id drawn by a create that rolled back. Every page over it takes the lock.
      await reader.query('BEGIN')
      await insertPostgresPet(reader as unknown as pg.PoolClient, { name: 'Lost', categoryId: 1n }, 0)
      await reader.query('ROLLBACK')
      const kept = await pets.create({ name: 'Kept', categoryId: 1n }, 0)
      // Another reader between its wait and its page read.
      await reader.query('BEGIN')
      await reader.query('LOCK TABLE pet_ids_settled IN SHARE MODE')
      try {
        const page = pets.list({ limit: 10, afterId: 0n })
        assert.equal(await pendingAfter(page, 2_000), false, 'a reader waited for another reader')
        assert.deepEqual(ids(await page), [kept.id])
        const create = pets.create({ name: 'Later', categoryId: 1n }, 0)
        assert.ok(await pendingAfter(create, 300), 'a create drew an id while a reader held the lock')
        await reader.query('COMMIT')
        assert.ok((await create).id > kept.id)
      } finally {
        await reader.query('ROLLBACK').catch(() => {})
      }
    })

    it('reads a filtered page along the (status, id) index, without sorting, whether it waits or not', async (t) => {
      const testApp = await buildTestApp('postgres')
      const explain = await connect(testApp, t)
      const plans: string[] = []
      explain.on('notice', (notice) => plans.push(notice.message ?? ''))
      // auto_explain sends the plan of every statement the function runs to this client.
      await explain.query("LOAD 'auto_explain'")
      await explain.query("SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = 'notice'")
      // On a table this small a sequential scan is cheaper; what matters is that the index can serve the order.
      await explain.query('SET enable_seqscan = off')
      // A hole (a rolled-back create) below a sold pet, so that the page is read twice: before and after the wait.
      await explain.query('BEGIN')
      await insertPostgresPet(explain as unknown as pg.PoolClient, { name: 'Lost', categoryId: 1n, status: 'sold' }, 0)
      await explain.query('ROLLBACK')
      await testApp.storage.pets.create({ name: 'Sold', categoryId: 1n, status: 'sold' }, 0)
      plans.length = 0
      await explain.query("SELECT * FROM pets_page(0, 21, 'sold')")
      const pageReads = plans.filter((plan) => plan.includes('status = page_status'))
      assert.equal(pageReads.length, 2, plans.join('\n---\n'))
      // The Limit sits right on the index scan: the rows come in id order, and nothing sorts them first.
      for (const plan of pageReads) assert.match(plan, /Limit[^\n]*\n\s*->\s+Index (Only )?Scan using pets_status_id/, plan)
    })
  })
}
