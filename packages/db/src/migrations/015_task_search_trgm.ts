import { sql, type Kysely } from 'kysely';

/**
 * The task list's prompt search (`?search=`, a case-insensitive substring of `title`) by a
 * trigram index: without one, a search for a word few tasks contain reads every task of the
 * tenant (~0.8 s at a million tasks here; ~1 ms with it). `pg_trgm` ships with PostgreSQL and is a
 * trusted extension (13+: a database owner may install it). Where it cannot be installed the
 * migration warns and goes on — search works, by scanning — and the index can be added later:
 * `create extension pg_trgm; create index concurrently tasks_title_trgm_idx on tasks using gin (title gin_trgm_ops)`.
 * On a large `tasks` table build it that way first (this migration keeps it): built here, it
 * holds writes to `tasks` while it builds (~15 s per million tasks here).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`do $$ begin
    if not exists (select 1 from pg_extension where extname = 'pg_trgm') then
      begin
        create extension pg_trgm;
      exception when others then
        raise warning 'pg_trgm could not be installed (%): the task list''s search scans each tenant''s tasks until it is (see migration 015)', sqlerrm;
      end;
    end if;
  end $$`.execute(db);
  await sql`do $$ begin
    if exists (select 1 from pg_extension where extname = 'pg_trgm') then
      create index if not exists tasks_title_trgm_idx on tasks using gin (title gin_trgm_ops);
    end if;
  end $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists tasks_title_trgm_idx`.execute(db);
}
