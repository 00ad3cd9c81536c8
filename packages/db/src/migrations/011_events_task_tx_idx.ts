import { sql, type Kysely } from 'kysely';

/**
 * A task's rows in commit order: (task_id, transaction_id, global_position). The gap-safe reads of
 * one task (the SSE tail `readTaskAfter` and the task caches' tail: "this task's rows at or after
 * a transaction horizon") match it exactly. Without it Postgres may AND the task index with the
 * whole log's (transaction_id, global_position) index — a plan whose cost grows with the whole
 * log, not the task — and a prepared statement keeps whichever plan it got first.
 *
 * Building it blocks appends for as long as it takes (migrations run in a transaction, so not
 * `concurrently`): on a large log, build it beforehand without blocking writers —
 * `create index concurrently events_task_tx_idx on events (task_id, transaction_id, global_position)` —
 * and this migration keeps it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index if not exists events_task_tx_idx on events (task_id, transaction_id, global_position)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists events_task_tx_idx`.execute(db);
}
