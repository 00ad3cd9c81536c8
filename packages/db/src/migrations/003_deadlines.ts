import { sql, type Kysely } from 'kysely';

/**
 * The deadline table: each live task's earliest open-request deadline, written in the same
 * statement as the event that opened or closed the request (it is part of the `tasks` read
 * model, so a rebuild restores it). The orchestrator's deadline poller reads it through the
 * partial index; no process keeps a timer per waiting task.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table tasks add column next_deadline timestamptz`.execute(db);
  await sql`create index tasks_next_deadline_idx on tasks (next_deadline) where next_deadline is not null`.execute(db);
}
