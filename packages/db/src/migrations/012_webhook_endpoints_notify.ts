import { sql, type Kysely } from 'kysely';
import { WEBHOOK_ENDPOINTS_CHANNEL } from '../schema.ts';

/**
 * Announce every change to `webhook_endpoints` (a NOTIFY on WEBHOOK_ENDPOINTS_CHANNEL at commit,
 * once per statement, empty payload). The relay sends a transition to `BATON_EVENTS` only when
 * the notifier serves it — the task has a webhook or mail recipients, or its tenant has
 * endpoints — and keeps the list of tenants with endpoints; this tells it to read the list again.
 * A trigger, not the gateway's statements, so any writer (an operator's SQL too) is heard.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create or replace function webhook_endpoints_notify() returns trigger language plpgsql as $$
    begin
      perform pg_notify(${sql.lit(WEBHOOK_ENDPOINTS_CHANNEL)}, '');
      return null;
    end $$`.execute(db);
  await sql`drop trigger if exists webhook_endpoints_notify on webhook_endpoints`.execute(db);
  await sql`create trigger webhook_endpoints_notify after insert or update of tenant_id or delete or truncate on webhook_endpoints
    for each statement execute function webhook_endpoints_notify()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists webhook_endpoints_notify on webhook_endpoints`.execute(db);
  await sql`drop function if exists webhook_endpoints_notify()`.execute(db);
}
