import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// One row per (API key, Idempotency-Key): in progress while response_status is NULL, then the
// response to answer again. created_at drives both expiry and pruning, hence its index.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE idempotency_keys (
      api_key_id TEXT NOT NULL REFERENCES api_keys (id),
      idempotency_key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      attempt_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      response_status INTEGER,
      response_location TEXT,
      response_body TEXT,
      PRIMARY KEY (api_key_id, idempotency_key),
      CHECK ((response_status IS NULL) = (response_body IS NULL))
    ) STRICT
  `.execute(db)
  await sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`.execute(db)
}
