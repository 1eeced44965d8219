import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// PostgreSQL only. The page function of 0004, able to answer on a server that cannot write.
export async function up(db: Kysely<unknown>): Promise<void> {
  // A server that cannot write (a standby not yet promoted, a primary fenced with
  // default_transaction_read_only) refuses the SHARE lock a page with a hole waits on (25006), so every
  // such page, and a failover leaves a hole of up to 32 ids for good, was a 503 while reads could be
  // served. No create can commit there, so the page is answered as read.
  await sql`
    CREATE OR REPLACE FUNCTION pets_page(after_id bigint, page_limit integer, page_status text)
    RETURNS TABLE (id bigint, name text, category_id bigint, status text)
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      found pets[];
      last_id bigint;
      present bigint;
    BEGIN
      IF page_status IS NULL THEN
        SELECT array_agg(page.p ORDER BY (page.p).id) INTO found
          FROM (SELECT p FROM pets p WHERE p.id > after_id ORDER BY p.id LIMIT page_limit) page;
        last_id := (found[cardinality(found)]).id;
        present := cardinality(found);
      ELSE
        WITH page AS (SELECT p FROM pets p WHERE p.status = page_status AND p.id > after_id ORDER BY p.id LIMIT page_limit),
        bound AS (SELECT max((page.p).id) AS last_id FROM page)
        SELECT (SELECT array_agg(page.p ORDER BY (page.p).id) FROM page), bound.last_id,
          (SELECT count(*) FROM pets q WHERE q.id > after_id AND q.id <= bound.last_id AND bound.last_id - after_id <= 10 * page_limit)
        INTO found, last_id, present FROM bound;
      END IF;
      IF last_id IS NULL OR present = last_id - after_id OR pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN
        RETURN QUERY SELECT f.id, f.name, f.category_id, f.status FROM unnest(found) WITH ORDINALITY f ORDER BY f.ordinality;
        RETURN;
      END IF;
      LOCK TABLE pet_ids_settled IN SHARE MODE;
      IF page_status IS NULL THEN
        RETURN QUERY SELECT p.id, p.name, p.category_id, p.status FROM pets p
          WHERE p.id > after_id ORDER BY p.id LIMIT page_limit;
      ELSE
        RETURN QUERY SELECT p.id, p.name, p.category_id, p.status FROM pets p
          WHERE p.status = page_status AND p.id > after_id ORDER BY p.id LIMIT page_limit;
      END IF;
    END
    $$
  `.execute(db)
}
