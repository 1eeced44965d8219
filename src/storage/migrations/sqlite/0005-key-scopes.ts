import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// What each key may do, space-separated (OAuth's form). Every key made before scopes could do
// everything, and keeps that meaning; so does a key inserted by an older version during an upgrade.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'pets:read pets:write' CHECK (scopes <> '')`.execute(db)
}
