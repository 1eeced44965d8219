import { type Kysely, sql } from 'kysely'

// Frozen: this file must never change once released, and never import application code.
// PostgreSQL only (SQLite commits ids in order): see docs/decisions/0015-postgres-read-path.md.
export async function up(db: Kysely<unknown>): Promise<void> {
  // Never holds a row: it exists for its table lock. Every create holds it in ROW EXCLUSIVE mode from
  // before it draws an id until it commits; a page read that must wait takes it in SHARE mode. ROW
  // EXCLUSIVE is compatible with itself and SHARE with itself: creates never wait for creates, nor
  // reads for reads; such a read waits for the creates in flight, and creates wait for it.
  await sql`CREATE TABLE pet_ids_settled ()`.execute(db)
  // One round trip per page, and most pages wait for nothing. The page and the count of every pet in
  // its id range come from one snapshot: when each id from after_id to the page's last is there, no
  // create in flight can fill a hole below the page's end, and the page is final. Otherwise (a create
  // in flight, or an id lost to a rollback or a crash, or a filtered page spread over too many ids to
  // count) it waits until no create is in flight and none can start, and reads the page again: a
  // VOLATILE function in READ COMMITTED takes a new snapshot per statement, so this read sees what
  // committed during the wait (a single SQL statement could not: its snapshot precedes the wait).
  await sql`
    CREATE FUNCTION pets_page(after_id bigint, page_limit integer, page_status text)
    RETURNS TABLE (id bigint, name text, category_id bigint, status text)
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      found pets[];
      last_id bigint;
      present bigint;
    BEGIN
      -- Each filter has a statement of its own, so that each has a plan of its own: the filtered one
      -- walks the (status, id) index in order (test/postgres-pages.test.ts checks it, before and after a wait).
      IF page_status IS NULL THEN
        -- Unfiltered, the page itself is every pet in its id range.
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
      IF last_id IS NULL OR present = last_id - after_id THEN
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
