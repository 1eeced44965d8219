import type { Database } from 'better-sqlite3'

/**
 * Runs `work`, which awaits, in one transaction of `db` opened with `begin`: committed when it
 * resolves, rolled back when it throws. better-sqlite3's own `db.transaction` takes only
 * synchronous functions; this is for the few that must await (migrations, copy, backup), and
 * nothing else may use `db` meanwhile.
 */
export async function inTransaction<T>(db: Database, begin: 'BEGIN' | 'BEGIN IMMEDIATE', work: () => Promise<T>): Promise<T> {
  db.exec(begin)
  try {
    const result = await work()
    db.exec('COMMIT')
    return result
  } finally {
    if (db.inTransaction) db.exec('ROLLBACK')
  }
}
