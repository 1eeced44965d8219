import type pg from 'pg'
import { inTransaction } from '../storage/postgres/transaction.js'
import { COPY_TABLES, type CopyReader, type CopyRepository, type CopyRow, type CopyWriter } from './copy.repository.js'

// Table and column names come from COPY_TABLES or from the database's own catalogue, never from a user.
const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

function reader(client: pg.PoolClient): CopyReader {
  return {
    async tables() {
      const { rows } = await client.query<{ table_name: string; column_name: string }>(
        `SELECT c.table_name, c.column_name FROM information_schema.columns c
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
         ORDER BY c.table_name, c.ordinal_position`,
      )
      const tables = new Map<string, string[]>()
      for (const row of rows) tables.set(row.table_name, [...(tables.get(row.table_name) ?? []), row.column_name])
      // A table without columns (one kept for its lock) has no row in information_schema.columns.
      const { rows: bare } = await client.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
      )
      for (const { table_name: name } of bare) if (!tables.has(name)) tables.set(name, [])
      return tables
    },
    async count(name) {
      const { rows } = await client.query<{ count: string }>(`SELECT count(*) FROM ${quoted(name)}`)
      return Number(rows[0]?.count ?? 0)
    },
    async *batches(table, size) {
      // Integers as text: exact, whatever type parsers the process has set. Text keys in "C" order, byte
      // by byte as SQLite's BINARY collation, whatever the database's collation. A cursor streams the
      // rows of this transaction's snapshot with a single sort, however many batches.
      const select = table.columns.map((column) => `t.${quoted(column.name)}${column.integer ? '::text' : ''}`).join(', ')
      const order = table.key
        .map((key) => `t.${quoted(key)}${table.columns.find((column) => column.name === key)?.integer === true ? '' : ' COLLATE "C"'}`)
        .join(', ')
      await client.query(`DECLARE copy_rows NO SCROLL CURSOR FOR SELECT ${select} FROM ${quoted(table.name)} t ORDER BY ${order}`)
      try {
        for (;;) {
          const { rows } = await client.query<CopyRow>({ text: `FETCH ${size} FROM copy_rows`, rowMode: 'array' })
          if (rows.length > 0) yield rows
          if (rows.length < size) break
        }
      } finally {
        // After a failed FETCH the transaction is aborted and CLOSE fails too: the FETCH's error is the one to tell.
        await client.query('CLOSE copy_rows').catch(() => {})
      }
    },
  }
}

export function createPostgresCopyRepository(pool: pg.Pool): CopyRepository {
  return {
    readSnapshot(read) {
      // One snapshot for every statement, and READ ONLY: the copy never writes to its source.
      return inTransaction(pool, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', (client) => read(reader(client)))
    },
    writeAtomically(write) {
      return inTransaction(pool, 'BEGIN', async (client) => {
        // EXCLUSIVE blocks every other writer (a server, a second copy) until the commit, but not readers:
        // the check that the target is empty holds until the copy is in. A second copy waits, then finds
        // the target full and is refused.
        await client.query(`LOCK TABLE ${COPY_TABLES.map((table) => quoted(table.name)).join(', ')} IN EXCLUSIVE MODE`)
        const writer: CopyWriter = {
          ...reader(client),
          async insert(table, rows) {
            // One parameter per column, an array of the batch's values: any batch size, one round trip.
            const columns = table.columns.map((column) => quoted(column.name)).join(', ')
            const arrays = table.columns.map((column, i) => `$${i + 1}::${column.integer ? 'bigint' : 'text'}[]`).join(', ')
            const overriding = table.identity === undefined ? '' : ' OVERRIDING SYSTEM VALUE'
            await client.query(
              `INSERT INTO ${quoted(table.name)} (${columns})${overriding} SELECT * FROM unnest(${arrays})`,
              table.columns.map((_, i) => rows.map((row) => row[i] ?? null)),
            )
          },
          async update(table, column, pairs) {
            const key = quoted(table.key[0] ?? '')
            await client.query(
              `UPDATE ${quoted(table.name)} t SET ${quoted(column)} = v.value FROM unnest($1::text[], $2::text[]) AS v(key, value) WHERE t.${key} = v.key`,
              [pairs.map(([k]) => k), pairs.map(([, value]) => value)],
            )
          },
          async continueIdentity(table) {
            if (table.identity === undefined) return
            const column = quoted(table.identity)
            await client.query(
              `SELECT setval(pg_get_serial_sequence($1, $2), max(${column})) FROM ${quoted(table.name)} HAVING max(${column}) IS NOT NULL`,
              [quoted(table.name), table.identity],
            )
          },
        }
        return write(writer)
      })
    },
  }
}
