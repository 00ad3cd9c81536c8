import { sql, type Kysely } from 'kysely';

/**
 * A task's forks, listed (`GET /v1/tasks?forkedFrom=<id>`): `tasks.forked_at_version` keeps the
 * version a fork was copied at beside `forked_from` (the list shows "fork of … at v12" without
 * reading the fork's log), filled in from the log for tasks forked before; a partial index finds a
 * task's forks, newest first, among a tenant's tasks (forks are few: only they are indexed).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table tasks add column forked_at_version integer`.execute(db);
  await sql`
    update tasks t set forked_at_version = (e.data->'forkedFrom'->>'atVersion')::int
    from events e
    where e.task_id = t.id and e.type = 'TaskSubmitted' and jsonb_typeof(e.data->'forkedFrom') = 'object'`.execute(db);
  await sql`create index tasks_forks_idx on tasks (tenant_id, forked_from, created_at desc, id desc) where forked_from is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists tasks_forks_idx`.execute(db);
  await sql`alter table tasks drop column forked_at_version`.execute(db);
}
