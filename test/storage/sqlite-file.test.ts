import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { openStorage, type Storage } from '../../src/repositories.js'
import { tempDir } from '../helper.js'
import { FAULTS, REX, petNames } from './sqlite-file-faults.js'

// The SQLite file taken from under an open storage: what it answers, what it writes where, and what
// it tells the operator. test/storage/sqlite-file-process.test.ts does the same to a running service.

interface Opened {
  dir: string
  /** The path DATABASE_URL names. */
  file: string
  storage: Storage
  errors: string[]
}

/** A migrated storage on `dir/petstore.db` (a symlink to `dir/a.db` when `link`), holding Rex. */
async function openWithRex(link: boolean): Promise<Opened> {
  const dir = tempDir('petstore-sqlite-file-')
  const file = path.join(dir, 'petstore.db')
  if (link) fs.symlinkSync(path.join(dir, 'a.db'), file)
  const errors: string[] = []
  const log = { warn: () => {}, error: (message: string) => errors.push(message) }
  const storage = await openStorage(loadConfig({ DATABASE_URL: `sqlite://${file}` }, dir).database, 'DATABASE_URL', log)
  await storage.migrate()
  await storage.pets.create(REX, 0)
  return { dir, file, storage, errors }
}

const isUnavailable = (storage: Storage) => (error: unknown) => storage.isUnavailable(error)

describe('a SQLite file taken from under the storage', () => {
  for (const fault of FAULTS) {
    describe(fault.name, () => {
      it('fails the readiness check, naming the reason', async (t) => {
        const { dir, file, storage } = await openWithRex(fault.link === true)
        t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
        await fault.apply(dir, file)
        await assert.rejects(storage.ping(), (error: unknown) => {
          assert.ok(storage.isUnavailable(error))
          assert.match((error as Error).message, /no longer at its path/)
          return true
        })
        await storage.close()
        await fault.afterClose(dir, file)
      })

      it('refuses a create as unavailable, and writes it nowhere', async (t) => {
        const { dir, file, storage } = await openWithRex(fault.link === true)
        t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
        await fault.apply(dir, file)
        await assert.rejects(storage.pets.create({ name: 'Lost', categoryId: 1n }, 0), isUnavailable(storage))
        await storage.close()
        await fault.afterClose(dir, file)
      })

      it('refuses reads as unavailable once the fault is noticed', async (t) => {
        const { dir, file, storage } = await openWithRex(fault.link === true)
        t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
        await fault.apply(dir, file)
        await storage.ping().catch(() => {})
        await assert.rejects(async () => storage.pets.findById(1n), isUnavailable(storage))
        await assert.rejects(async () => storage.pets.list({ limit: 10, afterId: 0n }), isUnavailable(storage))
        await storage.close()
        await fault.afterClose(dir, file)
      })
    })
  }

  it('refuses a create whose batch committed after the file was deleted', async (t) => {
    const { dir, file, storage } = await openWithRex(false)
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    // Creates are written together on the next turn of the event loop, after the check before them.
    const created = storage.pets.create({ name: 'Lost', categoryId: 1n }, 0)
    fs.rmSync(file)
    await assert.rejects(created, isUnavailable(storage))
    await storage.close()
  })

  it('logs one error naming DATABASE_URL and the path, however often the fault is met', async (t) => {
    const { dir, file, storage, errors } = await openWithRex(false)
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.rmSync(file)
    await storage.ping().catch(() => {})
    await storage.pets.create({ name: 'Lost', categoryId: 1n }, 0).catch(() => {})
    await storage.ping().catch(() => {})
    await storage.close()
    assert.equal(errors.length, 1, errors.join('\n'))
    assert.ok(errors[0]?.includes('DATABASE_URL') && errors[0].includes(file), errors[0])
  })

  it('serves and writes as before, logging nothing, while the file stays at its path', async (t) => {
    const { dir, file, storage, errors } = await openWithRex(false)
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    await storage.ping()
    await storage.pets.create({ name: 'Kept', categoryId: 1n }, 0)
    await storage.close()
    assert.deepEqual(await petNames(file), ['Rex', 'Kept'])
    assert.deepEqual(errors, [])
  })
})
