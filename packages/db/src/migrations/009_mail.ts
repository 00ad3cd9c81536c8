import { sql, type Kysely } from 'kysely';

/**
 * Mail (docs/email.md). `mail_sends` holds one row per (task, moment, recipient) — the key a
 * notifier claims before it sends, so two notifiers, a redelivered message or a re-fed bus never
 * mail twice: `sending` (claimed by `holder` until `lease_until`), `sent`, `retry` (a definite
 * failure, to be tried again), `failed` (given up) or `unknown` (the holder stopped while sending:
 * never tried again, since the mail may have gone). Each attempt is also a row of
 * `webhook_deliveries`, now with a `channel` (`webhook` | `email`), so GET /v1/tasks/:id/deliveries
 * lists both.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table mail_sends (
      task_id uuid not null,
      mail_key text not null,
      recipient text not null,
      message_id text not null,
      state text not null check (state in ('sending', 'sent', 'retry', 'failed', 'unknown')),
      attempts integer not null default 0,
      holder text,
      lease_until timestamptz,
      last_error text,
      updated_at timestamptz not null default now(),
      primary key (task_id, mail_key, recipient)
    )`.execute(db);
  await sql`alter table webhook_deliveries add column channel text not null default 'webhook' check (channel in ('webhook', 'email'))`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop column channel`.execute(db);
  await sql`drop table mail_sends`.execute(db);
}
