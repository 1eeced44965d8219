import { createHash } from 'node:crypto'
import { BOOKKEEPING_TABLES, COPY_TABLES, type CopyReader, type CopyRepository, type CopyRow, type CopyTable, type CopyWriter } from './copy.repository.js'

/** What a table holds, the same on both sides once copied. */
export interface TableSummary {
  table: string
  rows: number
  /** SHA-256, in hex, of each row's JSON array (integers as decimal strings) and a newline, in key order. */
  sha256: string
}

/** Reports how far a phase has come: rows done of the total. */
type Progress = (done: number, total: number) => void

const BATCH_SIZE = 1000

/** The digest of `rows`, fed batch by batch in key order; one definition for both sides. */
function tableDigest() {
  const hash = createHash('sha256')
  let rows = 0
  return {
    add(batch: CopyRow[]) {
      for (const row of batch) hash.update(`${JSON.stringify(row)}\n`)
      rows += batch.length
    },
    summary: (table: string): TableSummary => ({ table, rows, sha256: hash.digest('hex') }),
  }
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`

/**
 * Refuses a database whose tables are not the ones this version copies: a table or column missing
 * (not migrated, or not a petstore database), or one more (migrated by a newer version), which the
 * copy would silently leave behind.
 */
async function checkTables(reader: CopyReader, side: string): Promise<Map<string, string[]>> {
  const tables = await reader.tables()
  for (const table of COPY_TABLES) {
    const columns = tables.get(table.name)
    const expected = table.columns.map((column) => column.name)
    const missing = expected.filter((name) => !columns?.includes(name))
    const extra = columns?.filter((name) => !expected.includes(name)) ?? []
    if (columns === undefined || missing.length > 0) {
      throw new Error(
        `the ${side} has no ${columns === undefined ? `table ${table.name}` : `column ${missing.join(', ')} in ${table.name}`}: ` +
          'is it a petstore database? If so, bring it up to date with petstore migrate first',
      )
    }
    if (extra.length > 0) {
      throw new Error(`the ${side}'s ${table.name} has columns this version of petstore does not know (${extra.join(', ')}): use the version that migrated it`)
    }
  }
  return tables
}

/** Tables besides the migrations' that hold rows, as "name (n rows)". */
async function tablesWithRows(reader: CopyReader, tables: Map<string, string[]>): Promise<string[]> {
  const full: string[] = []
  for (const name of tables.keys()) {
    if (BOOKKEEPING_TABLES.has(name)) continue
    const rows = await reader.count(name)
    if (rows > 0) full.push(`${name} (${plural(rows, 'row')})`)
  }
  return full
}

async function copyTable(table: CopyTable, from: CopyReader, to: CopyWriter, step: (rows: number) => void) {
  const digest = tableDigest()
  const later = (table.later ?? []).map((name) => table.columns.findIndex((column) => column.name === name))
  for await (const batch of from.batches(table, BATCH_SIZE)) {
    digest.add(batch)
    await to.insert(table, later.length === 0 ? batch : batch.map((row) => row.map((value, i) => (later.includes(i) ? null : value))))
    step(batch.length)
  }
  for (const column of later) {
    // Every row is in now: the references can be written. The snapshot is the same for this second read.
    const name = table.columns[column]?.name ?? ''
    for await (const batch of from.batches(table, BATCH_SIZE)) {
      const pairs = batch.filter((row) => row[column] !== null).map((row): [string, string | null] => [row[0] ?? '', row[column] ?? null])
      if (pairs.length > 0) await to.update(table, name, pairs)
    }
  }
  await to.continueIdentity(table)
  return digest.summary(table.name)
}

/**
 * Copies every table of `from` into `to`, which must be empty (its migrations applied): one snapshot
 * of `from` read while it serves, written into `to` in one transaction that is verified (counts and
 * checksums of every table, read back from `to`) before it commits. A refusal, a failure or a kill
 * leaves `to` as it was. `phase` is told when copying and verifying begin, and reports their progress.
 */
export async function copyDatabase({
  from,
  to,
  phase = () => () => {},
}: {
  from: CopyRepository
  to: CopyRepository
  phase?: (name: 'copying' | 'verifying') => Progress
}): Promise<TableSummary[]> {
  return from.readSnapshot(async (source) => {
    const sourceTables = await checkTables(source, 'source')
    const unknown = [...sourceTables.keys()].filter((name) => !COPY_TABLES.some((table) => table.name === name))
    const left = await tablesWithRows(source, new Map(unknown.map((name) => [name, []])))
    if (left.length > 0) throw new Error(`the source has rows in tables this version of petstore does not copy: ${left.join(', ')}`)
    const counts: number[] = []
    // One after the other: a reader is one connection, which runs one query at a time.
    for (const table of COPY_TABLES) counts.push(await source.count(table.name))
    const total = counts.reduce((sum, count) => sum + count, 0)

    return to.writeAtomically(async (target) => {
      const full = await tablesWithRows(target, await checkTables(target, 'target'))
      if (full.length > 0) {
        throw new Error(`the target is not empty: ${full.join(', ')}; copy only into an empty database (nothing was written)`)
      }
      const copying = phase('copying')
      let done = 0
      copying(done, total)
      const copied: TableSummary[] = []
      for (const table of COPY_TABLES) {
        copied.push(await copyTable(table, source, target, (rows) => copying((done += rows), total)))
      }

      const verifying = phase('verifying')
      done = 0
      verifying(done, total)
      for (const [i, table] of COPY_TABLES.entries()) {
        const digest = tableDigest()
        for await (const batch of target.batches(table, BATCH_SIZE)) {
          digest.add(batch)
          verifying((done += batch.length), total)
        }
        const written = digest.summary(table.name)
        const read = copied[i]
        const counted = await target.count(table.name)
        if (read === undefined || written.rows !== read.rows || counted !== read.rows || read.rows !== counts[i] || written.sha256 !== read.sha256) {
          throw new Error(
            `verification failed for ${table.name}: the source has ${plural(read?.rows ?? 0, 'row')} (SHA-256 ${read?.sha256 ?? '-'}), ` +
              `the target would have ${plural(counted, 'row')} (SHA-256 ${written.sha256}); nothing was written`,
          )
        }
      }
      return copied
    })
  })
}
