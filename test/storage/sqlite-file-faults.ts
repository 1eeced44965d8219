import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { openStorage } from '../../src/repositories.js'

// What is done to a SQLite file under a running storage, and where its pets must be afterwards: shared by
// test/storage/sqlite-file.test.ts (the storage) and test/storage/sqlite-file-process.test.ts (the service).

export const REX = { name: 'Rex', categoryId: 1n }

/** A migrated database at `file` holding one pet per name, closed again. */
async function databaseWith(file: string, names: string[]): Promise<void> {
  const storage = await openStorage({ engine: 'sqlite', path: file })
  await storage.migrate()
  for (const name of names) await storage.pets.create({ name, categoryId: 1n }, 0)
  await storage.close()
}

/** The names of the pets in the database at `file`. */
export async function petNames(file: string): Promise<string[]> {
  const storage = await openStorage({ engine: 'sqlite', path: file })
  try {
    return (await storage.pets.list({ limit: 100, afterId: 0n })).pets.map((pet) => pet.name)
  } finally {
    await storage.close()
  }
}

/** Nothing of the database that was at `file` is left in a WAL there, to be replayed into the next one. */
function assertNoWalAt(file: string): void {
  const wal = `${file}-wal`
  assert.ok(!fs.existsSync(wal) || fs.statSync(wal).size === 0, `${wal} still holds frames`)
}

export interface Fault {
  name: string
  link?: boolean
  /** Done to the files while a storage has them open. */
  apply(dir: string, file: string): Promise<void>
  /** Once the storage is gone (closed, or its process killed): where each pet is, and that nothing it did after the fault was written anywhere. */
  afterClose(dir: string, file: string): Promise<void>
}

export const FAULTS: Fault[] = [
  {
    name: 'deleted',
    apply: async (_dir, file) => fs.rmSync(file),
    afterClose: async (_dir, file) => {
      assert.equal(fs.existsSync(file), false)
      assertNoWalAt(file)
    },
  },
  {
    name: 'renamed away',
    apply: async (dir, file) => fs.renameSync(file, path.join(dir, 'moved.db')),
    // The WAL stayed at the old path: only a checkpoint on closing puts Rex into the moved file.
    afterClose: async (dir, file) => {
      assertNoWalAt(file)
      assert.deepEqual(await petNames(path.join(dir, 'moved.db')), ['Rex'])
    },
  },
  {
    name: 'replaced by another database',
    apply: async (dir, file) => {
      await databaseWith(path.join(dir, 'other.db'), ['Other'])
      fs.renameSync(path.join(dir, 'other.db'), file)
    },
    afterClose: async (_dir, file) => {
      assertNoWalAt(file)
      assert.deepEqual(await petNames(file), ['Other'])
    },
  },
  {
    name: 'swapped through its symlink',
    link: true,
    // As Kubernetes swaps a mounted volume's `..data`: a new link renamed over the old one.
    apply: async (dir, file) => {
      await databaseWith(path.join(dir, 'b.db'), ['Other'])
      fs.symlinkSync(path.join(dir, 'b.db'), path.join(dir, 'next.db'))
      fs.renameSync(path.join(dir, 'next.db'), file)
    },
    afterClose: async (dir, file) => {
      assert.deepEqual(await petNames(file), ['Other'])
      assert.deepEqual(await petNames(path.join(dir, 'a.db')), ['Rex'])
    },
  },
  {
    name: 'left without its -wal file',
    // Rex is in the unlinked WAL only: a crash now would lose him, a checkpoint puts him in the file.
    apply: async (_dir, file) => fs.rmSync(`${file}-wal`),
    afterClose: async (_dir, file) => assert.deepEqual(await petNames(file), ['Rex']),
  },
]
