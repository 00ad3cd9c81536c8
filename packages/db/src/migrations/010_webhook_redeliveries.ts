import { sql, type Kysely } from 'kysely';

/**
 * Redelivery (docs/webhooks.md): POST /v1/tasks/:id/deliveries/:deliveryId/redeliver records a
 * request here; a notifier claims it (`claimed_until`, so a notifier that stops leaves it to
 * another), sends the delivery's message again and records the attempt in `webhook_deliveries`
 * with the request's id (`redelivery_id`), then marks it done.
 *
 * Endpoints (POST/GET/DELETE /v1/webhooks): a tenant's webhook subscriptions, delivered for every
 * task of the tenant, each with its own signing secret; during a rotation the previous secret
 * stays valid until `previous_expires_at` (both sign). A delivery to an endpoint names it
 * (`endpoint_id`); a task's own webhook has none.
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
  await sql`
    create table webhook_endpoints (
      id                  uuid primary key,
      tenant_id           text        not null,
      url                 text        not null,
      events              text[]      not null,
      secret              text        not null,
      previous_secret     text,
      previous_expires_at timestamptz,
      created_at          timestamptz not null default now(),
      rotated_at          timestamptz
    )`.execute(db);
  await sql`create index webhook_endpoints_tenant_idx on webhook_endpoints (tenant_id, created_at)`.execute(db);
  await sql`alter table webhook_deliveries add column endpoint_id uuid`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop column endpoint_id`.execute(db);
  await sql`drop table webhook_endpoints`.execute(db);
  await sql`alter table webhook_deliveries drop column redelivery_id`.execute(db);
  await sql`drop table webhook_redeliveries`.execute(db);
}
