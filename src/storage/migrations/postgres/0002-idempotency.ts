import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// Same name, table and meaning as the SQLite migration of the same number.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE idempotency_keys (
      api_key_id text NOT NULL REFERENCES api_keys (id),
      idempotency_key text NOT NULL,
      fingerprint text NOT NULL,
      attempt_id text NOT NULL,
      created_at bigint NOT NULL,
      response_status integer,
      response_location text,
      response_body text,
      PRIMARY KEY (api_key_id, idempotency_key),
      CHECK ((response_status IS NULL) = (response_body IS NULL))
    )
  `.execute(db)
  await sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`.execute(db)
}
