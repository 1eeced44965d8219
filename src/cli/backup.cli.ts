import fs from 'node:fs'
import path from 'node:path'
import { type CliIo, describeDatabase, progressReporter } from './output.js'
import { UsageError, parse } from './usage.js'
import { loadConfig } from '../config.js'
import { openDatabase } from '../storage/open-database.js'
import { createPrivateFile } from '../storage/sqlite/private-files.js'

export const BACKUP_HELP = `Usage: petstore backup <file> [--force]

Copies the SQLite database of DATABASE_URL to <file>: one consistent snapshot, taken while servers
keep serving and writing (what they write after the backup begins is not in it). The copy is written
beside <file> and renamed into place when complete, so <file> is never half a backup.
Restore: stop the service, replace the database file with the backup, start the service.
On PostgreSQL, use pg_dump instead (exit 2).
  --force   Overwrite <file> if it exists (otherwise an existing <file> is refused, exit 1)
<file> must be in a folder that exists, and not be a folder itself.`

export async function backupCommand(args: string[], io: CliIo): Promise<0 | 1 | 2> {
  const { values, positionals } = parse('backup', args, { force: { type: 'boolean' } }, { positionals: 1, what: 'file to write' })
  const config = loadConfig(io.env, io.cwd)
  const { database } = config
  if (database.engine !== 'sqlite') {
    io.stderr(
      'petstore: backup copies the SQLite store; on PostgreSQL use pg_dump, e.g.\n' +
        '  pg_dump --format=custom --file=petstore.dump "$DATABASE_URL"\n' +
        'and pg_restore to restore it.\n',
    )
    return 2
  }
  const target = path.resolve(io.cwd, positionals[0] ?? '')
  if (target === database.path) throw new UsageError('the backup file must not be the database itself', 'backup')
  // Before a page is copied: a whole database copied would otherwise fail at the very end.
  if (fs.statSync(target, { throwIfNoEntry: false })?.isDirectory() === true) {
    throw new UsageError(`${target} is a folder; name the file to write, such as ${path.join(target, 'petstore-backup.db')}`, 'backup')
  }
  if (!fs.existsSync(path.dirname(target))) {
    io.stderr(`petstore: cannot write the backup to ${target}: the folder ${path.dirname(target)} does not exist\n`)
    return 1
  }
  if (fs.existsSync(target) && values.force !== true) {
    io.stderr(`petstore: ${target} already exists; pass --force to overwrite it\n`)
    return 1
  }
  if (!fs.existsSync(database.path)) {
    io.stderr(`petstore: there is no SQLite database at ${database.path} to back up (see DATABASE_URL)\n`)
    return 1
  }
  // Written beside the target and renamed into place: the target is a whole backup or untouched.
  const partial = `${target}.partial-${process.pid}`
  const progress = progressReporter(io, 'Backing up', 'pages')
  const startedAt = new Date()
  const storage = await openDatabase(database)
  io.stderr(`${describeDatabase(database, io.cwd, false)}\n`)
  try {
    if (storage.backup === undefined) throw new Error('this engine has no backup')
    // SQLite would create it 0644 less the umask: a backup holds what the database does.
    createPrivateFile(partial)
    await storage.backup(partial, progress.update)
    progress.end()
    fs.renameSync(partial, target)
  } catch (error) {
    progress.end()
    fs.rmSync(partial, { force: true })
    throw new Error(`cannot write the backup to ${target}: ${(error as Error).message}`, { cause: error })
  } finally {
    await storage.close()
  }
  const bytes = fs.statSync(target).size
  io.stdout(`Backed up the database as of ${startedAt.toISOString()} to ${target} (${(bytes / 1_048_576).toFixed(1)} MiB).\n`)
  return 0
}
