import { sql, type Kysely } from 'kysely';

/**
 * Redelivery (docs/webhooks.md): POST /v1/tasks/:id/deliveries/:deliveryId/redeliver records a
 * request here; a notifier claims it (`claimed_until`, so a notifier that stops leaves it to
 * another), sends the delivery's message again and records the attempt in `webhook_deliveries`
 * with the request's id (`redelivery_id`), then marks it done.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table webhook_redeliveries (
      id            bigint generated always as identity primary key,
      task_id       uuid        not null,
      delivery_id   bigint      not null,
      requested_by  text        not null,
      requested_at  timestamptz not null default now(),
      claimed_until timestamptz,
      done_at       timestamptz
    )`.execute(db);
  await sql`create index webhook_redeliveries_open_idx on webhook_redeliveries (id) where done_at is null`.execute(db);
  await sql`alter table webhook_deliveries add column redelivery_id bigint`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop column redelivery_id`.execute(db);
  await sql`drop table webhook_redeliveries`.execute(db);
}
