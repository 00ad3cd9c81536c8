import { sql, type Kysely } from 'kysely';

/**
 * An attempt after which the notifiers stop trying (the last one allowed failed, or the receiver
 * answered 410 Gone): the deliveries list says so, instead of leaving a last "failed" row that
 * reads like a retry still to come.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries add column if not exists given_up boolean not null default false`.execute(db);
  // A 410 was final before too; other final failures of the past cannot be told from the log here.
  await sql`update webhook_deliveries set given_up = true where status_code = 410 and channel = 'webhook'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop column if exists given_up`.execute(db);
}
