import { sql, type Kysely } from 'kysely';

/**
 * A task's rows in commit order: (task_id, transaction_id, global_position). The gap-safe reads of
 * one task (the SSE tail `readTaskAfter` and the task caches' tail: "this task's rows at or after
 * a transaction horizon") match it exactly. Without it Postgres may AND the task index with the
 * whole log's (transaction_id, global_position) index — a plan whose cost grows with the whole
 * log, not the task — and a prepared statement keeps whichever plan it got first.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index events_task_tx_idx on events (task_id, transaction_id, global_position)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists events_task_tx_idx`.execute(db);
}
