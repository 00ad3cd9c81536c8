import { sql, type Kysely } from 'kysely';

/**
 * The console's task list (issue: filters and forks): `tasks.forked_from` names the task a fork
 * was copied from, so the list marks forks without reading their logs; filled in from the log
 * for tasks forked before. An index serves the list filtered by team.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table tasks add column forked_from uuid`.execute(db);
  await sql`
    update tasks t set forked_from = (e.data->'forkedFrom'->>'taskId')::uuid
    from events e
    where e.task_id = t.id and e.type = 'TaskSubmitted' and jsonb_typeof(e.data->'forkedFrom') = 'object'`.execute(db);
  await sql`create index tasks_tenant_team_created_idx on tasks (tenant_id, team, created_at desc, id desc)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists tasks_tenant_team_created_idx`.execute(db);
  await sql`alter table tasks drop column forked_from`.execute(db);
}
