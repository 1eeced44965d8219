import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// PostgreSQL only. A count of the statements that changed or removed pets, by anyone: the API only adds
// pets, so an answer read with count n is current while the count is n (docs/decisions/0010-performance.md).
export async function up(db: Kysely<unknown>): Promise<void> {
  // One row. Bumped in the rewriting statement's transaction, so a reader sees the count move exactly when
  // it sees what changed.
  await sql`CREATE TABLE pet_rewrites (count bigint NOT NULL)`.execute(db)
  await sql`INSERT INTO pet_rewrites VALUES (0)`.execute(db)
  // SECURITY DEFINER: a role allowed to change pets need not be allowed to write this table. Its search path
  // is the migration's, so that the table it names is this one whoever calls it.
  await sql`
    CREATE FUNCTION count_pet_rewrite() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
    BEGIN
      UPDATE pet_rewrites SET count = count + 1;
      RETURN NULL;
    END
    $$
  `.execute(db)
  await sql`CREATE TRIGGER pets_rewritten AFTER UPDATE OR DELETE OR TRUNCATE ON pets FOR EACH STATEMENT EXECUTE FUNCTION count_pet_rewrite()`.execute(db)
}
