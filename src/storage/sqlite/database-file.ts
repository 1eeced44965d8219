import fs from 'node:fs'
import type { Database } from 'better-sqlite3'
import { StorageFault } from '../database.js'

/** A file is the same one while its device and inode are; bigint, as an inode may pass 2^53. */
interface Identity {
  dev: bigint
  ino: bigint
}

/** The file `file` names now, following symlinks as SQLite does; undefined when it names none. */
function identify(file: string): Identity | undefined {
  let stats: fs.BigIntStats | undefined
  try {
    stats = fs.statSync(file, { bigint: true, throwIfNoEntry: false })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined
    // A folder made unreadable proves nothing moved: refused for now, but not for good.
    throw new StorageFault('The database file’s path cannot be checked.', { cause: error })
  }
  return stats === undefined ? undefined : { dev: stats.dev, ino: stats.ino }
}

const same = (a: Identity | undefined, b: Identity | undefined): boolean => a?.dev === b?.dev && a?.ino === b?.ino

const MOVED = 'The database file is no longer at its path: it was deleted, renamed or replaced. Restart the service.'

/**
 * Returns a check that throws a `StorageFault` once `file` no longer names the database `db` has open
 * (deleted, renamed away, replaced, or a symlink swapped), or the WAL beside it was deleted. SQLite
 * goes on writing into the unlinked file, which is lost with the process: a commit there is an
 * acknowledgement lost, so writes check before and after they commit. The first time, `noticed`
 * is called, and `db` is checkpointed and closed: reads are refused from then on. The WAL is checked
 * before a write too: the checkpoint would put a write into a deleted WAL in the file, a pet answered 503.
 */
export function guardDatabaseFile(db: Database, file: string, noticed: () => void): () => void {
  if (file === ':memory:' || file === '') return () => {}
  const opened = identify(file)
  // SQLite keeps the WAL beside the file a symlink leads to.
  const walFile = `${fs.realpathSync(file)}-wal`
  // Made by the first transaction, the WAL then stays until the last connection closes: this one is open.
  let wal = identify(walFile)
  let moved = false

  const close = () => {
    // Not inside a transaction (a backup's); the next check tries again.
    if (!db.open || db.inTransaction) return
    // SQLite skips the checkpoint when closing a file that has moved, and leaves its WAL at the path,
    // where the next open would replay it into whatever database is there now. Checkpointed here,
    // the WAL is emptied and the file is whole wherever it went (renamed away, or still unlinked).
    try {
      db.pragma('wal_checkpoint(TRUNCATE)')
    } finally {
      db.close()
    }
  }

  return () => {
    if (!moved) {
      const walNow = identify(walFile)
      wal ??= walNow
      if (same(identify(file), opened) && same(walNow, wal)) return
      moved = true
      noticed()
    }
    let closing: unknown
    try {
      close()
    } catch (error) {
      closing = error
    }
    throw new StorageFault(MOVED, closing === undefined ? undefined : { cause: closing })
  }
}

/** The methods of `R` that return a promise. */
type AsyncMethods<R> = { [K in keyof R]: R[K] extends (...args: never[]) => Promise<unknown> ? K : never }[keyof R]

/** `repository`, with `check` run before each of its `writes` and again once it has committed, before its caller hears of it. */
export function guardWrites<R extends object>(repository: R, writes: readonly AsyncMethods<R>[], check: () => void): R {
  const guarded = { ...repository }
  for (const name of writes) {
    const write = repository[name] as (...args: unknown[]) => Promise<unknown>
    guarded[name] = (async (...args: unknown[]) => {
      check()
      const result = await write.apply(repository, args)
      check()
      return result
    }) as R[typeof name]
  }
  return guarded
}
