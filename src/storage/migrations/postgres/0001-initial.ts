import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// Same name, tables and meaning as the SQLite migration of the same number.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE pets (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name text NOT NULL,
      category_id bigint NOT NULL,
      status text CHECK (status IN ('available', 'pending', 'sold')),
      created_at bigint NOT NULL
    )
  `.execute(db)
  await sql`CREATE INDEX pets_status_id ON pets (status, id)`.execute(db)
  await sql`
    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      name text NOT NULL,
      prefix text NOT NULL,
      secret_hash text NOT NULL UNIQUE,
      environment text NOT NULL CHECK (environment IN ('production', 'staging')),
      created_at bigint NOT NULL,
      expires_at bigint,
      revoked_at bigint,
      last_used_at bigint
    )
  `.execute(db)
}
