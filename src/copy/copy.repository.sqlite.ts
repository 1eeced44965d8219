import type { Database } from 'better-sqlite3'
import { inTransaction } from '../storage/sqlite/transaction.js'
import type { CopyReader, CopyRepository, CopyRow, CopyWriter } from './copy.repository.js'

// Table and column names come from COPY_TABLES or from the database's own catalogue, never from a user.
const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

function reader(db: Database): CopyReader {
  return {
    tables() {
      const names = db
        .prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
        .all()
      const columns = (table: string) => db.prepare<[], { name: string }>(`PRAGMA table_info(${quoted(table)})`).all().map((column) => column.name)
      return Promise.resolve(new Map(names.map(({ name }) => [name, columns(name)])))
    },
    count(name) {
      return Promise.resolve(Number(db.prepare(`SELECT count(*) FROM ${quoted(name)}`).pluck().get()))
    },
    async *batches(table, size) {
      // Text keys compare with SQLite's BINARY collation: byte by byte, as PostgreSQL's "C" does.
      const rows = db
        .prepare(`SELECT ${table.columns.map((column) => quoted(column.name)).join(', ')} FROM ${quoted(table.name)} ORDER BY ${table.key.map(quoted).join(', ')}`)
        .raw(true)
        // int64 values must not pass through a double.
        .safeIntegers(true)
        .iterate() as IterableIterator<unknown[]>
      let batch: CopyRow[] = []
      for (const row of rows) {
        batch.push(row.map((value) => (value === null ? null : String(value as bigint | string))))
        if (batch.length === size) {
          yield batch
          batch = []
        }
      }
      if (batch.length > 0) yield batch
    },
  }
}

export function createSqliteCopyRepository(db: Database): CopyRepository {
  return {
    readSnapshot(read) {
      // In WAL mode a read transaction sees the database as of its first read, while writers go on.
      return inTransaction(db, 'BEGIN', () => {
        db.prepare('SELECT count(*) FROM sqlite_schema').get()
        return read(reader(db))
      })
    },
    writeAtomically(write) {
      // IMMEDIATE: the write lock is held from the start, so nothing else writes between the check that
      // the target is empty and the commit; a second copy waits for it (busy_timeout) or fails.
      return inTransaction(db, 'BEGIN IMMEDIATE', () => {
        const writer: CopyWriter = {
          ...reader(db),
          insert(table, rows) {
            const insert = db.prepare(
              `INSERT INTO ${quoted(table.name)} (${table.columns.map((column) => quoted(column.name)).join(', ')}) VALUES (${table.columns.map(() => '?').join(', ')})`,
            )
            for (const row of rows) insert.run(row.map((value, i) => (value !== null && table.columns[i]?.integer === true ? BigInt(value) : value)))
            return Promise.resolve()
          },
          update(table, column, pairs) {
            const update = db.prepare(`UPDATE ${quoted(table.name)} SET ${quoted(column)} = ? WHERE ${quoted(table.key[0] ?? '')} = ?`)
            for (const [key, value] of pairs) update.run(value, key)
            return Promise.resolve()
          },
          continueIdentity() {
            // Nothing to do: with AUTOINCREMENT, inserting an id above sqlite_sequence's moves it there.
            return Promise.resolve()
          },
        }
        return write(writer)
      })
    },
  }
}
