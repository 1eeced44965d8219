import { type CliIo, withStorage } from './output.js'
import { parse } from './usage.js'
import { loadConfig } from '../config.js'

export const MIGRATE_HELP =
  'Usage: petstore migrate\n\nApplies pending migrations to the database of DATABASE_URL (creating a SQLite file if needed, in a folder\nthat exists; only the default ./data is made).'

export async function migrateCommand(args: string[], io: CliIo): Promise<0> {
  parse('migrate', args, {})
  const applied = await withStorage(loadConfig(io.env, io.cwd), io, async (_storage, applied) => applied)
  io.stdout(applied.length === 0 ? 'Database is up to date.\n' : `Applied: ${applied.join(', ')}\n`)
  return 0
}
