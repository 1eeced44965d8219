import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// Same name, column and meaning as the SQLite migration of the same number.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN lineage text REFERENCES api_keys (id)`.execute(db)
  await sql`UPDATE api_keys SET lineage = id`.execute(db)
}
