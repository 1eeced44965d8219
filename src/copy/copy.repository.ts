/*
 * What `petstore copy` reads and writes, engine by engine. Rows travel as text: an integer is its exact
 * decimal digits (ids go above 2^53, beyond what a JavaScript number holds), so that both engines give
 * the same row for the same data and the checksums of the two sides can be compared.
 */

/** One column value: text, an integer's decimal digits, or null. */
type CopyValue = string | null

/** One row, its values in the order of its table's `columns`. */
export type CopyRow = CopyValue[]

interface CopyColumn {
  readonly name: string
  readonly integer: boolean
}

/** A table the copy carries across, the same in both engines' migrations. */
export interface CopyTable {
  readonly name: string
  readonly columns: readonly CopyColumn[]
  /** The primary key: rows are read in its order, integers by value and text byte by byte (UTF-8). */
  readonly key: readonly string[]
  /** A column drawn from a sequence: the target's sequence continues after the largest copied value. */
  readonly identity?: string
  /**
   * Columns that refer to other rows of the same table: written once every row is in, since a row may
   * refer to one that comes after it in key order and a foreign key is checked at each statement.
   */
  readonly later?: readonly string[]
}

const int = (name: string): CopyColumn => ({ name, integer: true })
const text = (name: string): CopyColumn => ({ name, integer: false })

/**
 * Every table that holds data, in an order that writes a row after the rows it refers to. Kysely's
 * `schema_migrations` tables are not copied: the target gets its own engine's migrations.
 */
export const COPY_TABLES: readonly CopyTable[] = [
  {
    name: 'pets',
    columns: [int('id'), text('name'), int('category_id'), text('status'), int('created_at')],
    key: ['id'],
    identity: 'id',
  },
  {
    name: 'api_keys',
    columns: [
      text('id'),
      text('name'),
      text('prefix'),
      text('secret_hash'),
      text('environment'),
      int('created_at'),
      int('expires_at'),
      int('revoked_at'),
      int('last_used_at'),
      text('replaced_by'),
      text('scopes'),
      text('lineage'),
    ],
    key: ['id'],
    later: ['replaced_by', 'lineage'],
  },
  {
    name: 'idempotency_keys',
    columns: [
      text('api_key_id'),
      text('idempotency_key'),
      text('fingerprint'),
      text('attempt_id'),
      int('created_at'),
      int('response_status'),
      text('response_location'),
      text('response_body'),
    ],
    key: ['api_key_id', 'idempotency_key'],
  },
  {
    name: 'deprecated_calls',
    columns: [text('operation'), text('api_key_id'), int('calls'), int('first_seen'), int('last_seen')],
    key: ['operation', 'api_key_id'],
  },
]

/** Tables of the migration machinery and PostgreSQL's count of rewrites (migration 0008), which each database keeps for itself. */
export const BOOKKEEPING_TABLES: ReadonlySet<string> = new Set(['schema_migrations', 'schema_migrations_lock', 'pet_rewrites'])

export interface CopyReader {
  /** Every table of the database (the engine's own internal ones aside) and its columns. */
  tables(): Promise<Map<string, string[]>>
  /** The number of rows of the table `name`. */
  count(name: string): Promise<number>
  /** Every row of `table` in key order, `size` at a time: never the whole table in memory. */
  batches(table: CopyTable, size: number): AsyncIterable<CopyRow[]>
}

export interface CopyWriter extends CopyReader {
  /** Inserts `rows`, exactly as given (ids included). */
  insert(table: CopyTable, rows: CopyRow[]): Promise<void>
  /** Sets `column` of the row of each key: `pairs` are [key, value], for tables with a one-column key. */
  update(table: CopyTable, column: string, pairs: [string, CopyValue][]): Promise<void>
  /** Moves the sequence of `table.identity` past the largest value in the table, if it has rows. */
  continueIdentity(table: CopyTable): Promise<void>
}

export interface CopyRepository {
  /**
   * Runs `read` on one consistent snapshot of the database, without blocking its writers: what they
   * commit meanwhile is not seen.
   */
  readSnapshot<T>(read: (reader: CopyReader) => Promise<T>): Promise<T>
  /**
   * Runs `write` in one transaction that first locks the copied tables against other writers, and
   * commits it if `write` resolves; if `write` throws (or the process dies), nothing of it remains.
   */
  writeAtomically<T>(write: (writer: CopyWriter) => Promise<T>): Promise<T>
}
