import type { Database } from 'better-sqlite3'
import type { Claim, Claimed } from '../storage/claim.js'
import { openSqliteClaim } from '../storage/sqlite/claim.js'
import type { ListPetsQuery, PetRead, PetsRead, NewPet, Pet, PetStatus, PetsRepository } from './pets.repository.js'

interface PetRow {
  id: bigint
  name: string
  category_id: bigint
  status: PetStatus | null
}

function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row.id, name: row.name, categoryId: row.category_id }
  if (row.status !== null) pet.status = row.status
  return pet
}

/**
 * Tells when pets may have changed, exactly, so that answers can be cached until they do.
 * `PRAGMA data_version` changes when any other connection, in any process, commits; it does not
 * see this connection's own commits, so every writer of pets here reports them.
 */
export interface SqlitePetChanges {
  /** A pet write of this connection has committed. */
  committed(): void
  /** Differs from every earlier value once pets may have changed. */
  version(): number
}

export function trackSqlitePetChanges(db: Database): SqlitePetChanges {
  const dataVersion = db.prepare('PRAGMA data_version').pluck()
  let seen: unknown
  let generation = 0
  // The pragma costs a read transaction, so it is asked once per turn of the event loop: first
  // when a request of this turn needs it, which is after every request of the turn has arrived
  // (and so after any commit a client saw before sending one).
  let askedThisTurn = false
  const nextTurn = () => {
    askedThisTurn = false
  }
  return {
    committed() {
      generation++
    },
    version() {
      if (!askedThisTurn) {
        askedThisTurn = true
        setImmediate(nextTurn)
        const current = dataVersion.get()
        if (current !== seen) {
          seen = current
          generation++
        }
      }
      return generation
    },
  }
}

function preparePetInsert(db: Database): (pet: NewPet, createdAt: number) => Pet {
  // safeIntegers: ids and category ids are int64 and must not pass through a double.
  const insert = db
    .prepare<[string, bigint, PetStatus | null, number]>(
      'INSERT INTO pets (name, category_id, status, created_at) VALUES (?, ?, ?, ?)',
    )
    .safeIntegers(true)
  return (pet, createdAt) => {
    const { lastInsertRowid } = insert.run(pet.name, pet.categoryId, pet.status ?? null, createdAt)
    return { ...pet, id: BigInt(lastInsertRowid) }
  }
}

interface PendingCreate {
  pet: NewPet
  createdAt: number
  resolve: (pet: Pet) => void
  reject: (error: unknown) => void
}

/**
 * Group commit: the creates that arrive in one turn of the event loop are written in one
 * transaction, and each is answered only once that transaction has committed (synchronous=FULL:
 * on disk). One fsync then serves many creates instead of one each.
 */
function groupCommit(db: Database, changes: SqlitePetChanges, guard: () => void): (pet: NewPet, createdAt: number) => Promise<Pet> {
  const insert = preparePetInsert(db)
  const insertAll = db.transaction((batch: PendingCreate[]) => batch.map(({ pet, createdAt }) => insert(pet, createdAt)))
  let pending: PendingCreate[] = []

  function flush(): void {
    const batch = pending
    pending = []
    let created: Pet[]
    try {
      guard()
      created = insertAll.immediate(batch)
      // A commit into a file that moved meanwhile is lost with the process: not acknowledged.
      guard()
    } catch (error) {
      // Input was validated before it got here: what fails a batch (busy, full, read-only, I/O)
      // is the database's state, and it fails every create in the batch alike.
      for (const { reject } of batch) reject(error)
      return
    }
    changes.committed()
    batch.forEach(({ resolve }, i) => resolve(created[i] as Pet))
  }

  return (pet, createdAt) =>
    new Promise<Pet>((resolve, reject) => {
      if (pending.push({ pet, createdAt, resolve, reject }) === 1) setImmediate(flush)
    })
}

/** The filtered page query; its plan must walk the (status, id) index in order (test/pets/read-cache.test.ts). */
export const SQLITE_LIST_BY_STATUS =
  'SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?'

/**
 * `guard` is called before and after each batch of creates commits, and throws when the database may not be
 * written (its file moved: src/storage/sqlite/database-file.ts): once per batch rather than per create.
 */
export function createSqlitePetsRepository(db: Database, changes: SqlitePetChanges, guard: () => void = () => {}): PetsRepository {
  // SQLite has one writer at a time and ids grow with each commit, so keyset pages never miss a pet.
  const listAll = db
    .prepare<[bigint, number], PetRow>('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?')
    .safeIntegers(true)
  const listByStatus = db
    .prepare<[PetStatus, bigint, number], PetRow>(SQLITE_LIST_BY_STATUS)
    .safeIntegers(true)
  const byId = db
    .prepare<[bigint], PetRow>('SELECT id, name, category_id, status FROM pets WHERE id = ?')
    .safeIntegers(true)

  const insert = preparePetInsert(db)
  // IMMEDIATE takes the write lock first: other processes on the same file (--workers) wait for
  // it, so a claim found free is still free when the pet is written. The transaction is
  // synchronous: no other request of this process runs inside it, and a crash rolls all of it back.
  const transaction = db.transaction((work: () => void) => {
    work()
  })

  return {
    create: groupCommit(db, changes, guard),
    createOnce<Result, Held>(
      pet: NewPet,
      createdAt: number,
      sealed: Claim<Result, Held>,
      respond: (pet: Pet) => Result,
    ): Promise<Claimed<Result, Held>> {
      const claim = openSqliteClaim(sealed)
      let outcome!: Claimed<Result, Held>
      transaction.immediate(() => {
        const held = claim.take()
        if (held !== undefined) {
          outcome = { held }
          return
        }
        const result = respond(insert(pet, createdAt))
        claim.complete(result)
        outcome = { created: result }
      })
      if ('created' in outcome) changes.committed()
      return Promise.resolve(outcome)
    },
    list({ limit, status, afterId }: ListPetsQuery): Promise<PetsRead> {
      const rows = status === undefined ? listAll.all(afterId, limit) : listByStatus.all(status, afterId, limit)
      return Promise.resolve({ pets: rows.map(toPet) })
    },
    findById(id: bigint): Promise<PetRead> {
      const row = byId.get(id)
      return Promise.resolve({ pet: row === undefined ? undefined : toPet(row) })
    },
    version: () => changes.version(),
  }
}
