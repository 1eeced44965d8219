import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// lineage: the id of the first key of a rotation chain, which a rotation passes on to the successor, so
// that Idempotency-Keys belong to the client rather than to one of its keys. A key made before it is the
// first of its own line; a chain rotated before it starts a new line at each link, as it always did.
// Nullable: a key that an older release inserts during an upgrade is read as the first of its line.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE api_keys ADD COLUMN lineage TEXT REFERENCES api_keys (id)`.execute(db)
  await sql`UPDATE api_keys SET lineage = id`.execute(db)
}
