import type { Migration } from 'kysely'
import * as initial from './0001-initial.js'

/** Append-only, and named as the SQLite migrations are: both engines share one history. */
export const postgresMigrations: Record<string, Migration> = {
  '0001-initial': initial,
}
