import { sql, type Kysely } from 'kysely';

/**
 * A tenant's own key for its tasks' own webhooks (`POST /v1/task-webhook-secret`): with it, a
 * task's `webhook` is signed with a secret only that tenant is shown instead of the deployment's
 * one `WEBHOOK_SECRET`, which no tenant can be given without being able to sign for every other.
 * `deployment_secret_until`: the deployment's secret signs beside it until then (receivers move over), as a
 * rotated secret's `previous_secret` does until `previous_expires_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table task_webhook_secrets (
      tenant_id           text primary key,
      secret              text        not null,
      previous_secret     text,
      previous_expires_at timestamptz,
      deployment_secret_until        timestamptz,
      created_at          timestamptz not null default now(),
      rotated_at          timestamptz
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table task_webhook_secrets`.execute(db);
}
