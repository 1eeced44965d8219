import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// replaced_by records key rotation: the key that took over from this one.
// deprecated_calls counts calls to deprecated operations per key. It has no foreign key to
// api_keys on purpose: the counts of a key that is gone still say who called.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN replaced_by TEXT REFERENCES api_keys (id)`.execute(db)
  await sql`
    CREATE TABLE deprecated_calls (
      operation TEXT NOT NULL,
      api_key_id TEXT NOT NULL,
      calls INTEGER NOT NULL CHECK (calls > 0),
      first_seen INTEGER NOT NULL,
      last_seen INTEGER NOT NULL,
      PRIMARY KEY (operation, api_key_id)
    ) STRICT
  `.execute(db)
}
