import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// Same name, tables and meaning as the SQLite migration of the same number.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN replaced_by text REFERENCES api_keys (id)`.execute(db)
  await sql`
    CREATE TABLE deprecated_calls (
      operation text NOT NULL,
      api_key_id text NOT NULL,
      calls bigint NOT NULL CHECK (calls > 0),
      first_seen bigint NOT NULL,
      last_seen bigint NOT NULL,
      PRIMARY KEY (operation, api_key_id)
    )
  `.execute(db)
}
