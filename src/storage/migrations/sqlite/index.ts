import type { Migration } from 'kysely'
import * as initial from './0001-initial.js'

/** Append-only: a new migration gets the next number; released ones are never edited. */
export const sqliteMigrations: Record<string, Migration> = {
  '0001-initial': initial,
}
