import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE pets (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL,
      category_id INTEGER NOT NULL,
      status TEXT CHECK (status IN ('available', 'pending', 'sold')),
      created_at INTEGER NOT NULL
    ) STRICT
  `.execute(db)
  await sql`CREATE INDEX pets_status_id ON pets (status, id)`.execute(db)
  await sql`
    CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      secret_hash TEXT NOT NULL UNIQUE,
      environment TEXT NOT NULL CHECK (environment IN ('production', 'staging')),
      created_at INTEGER NOT NULL,
      expires_at INTEGER,
      revoked_at INTEGER,
      last_used_at INTEGER
    ) STRICT
  `.execute(db)
}
