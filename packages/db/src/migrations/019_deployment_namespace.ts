import { sql, type Kysely } from 'kysely';

/**
 * The namespace (BATON_NAMESPACE) that owns this database: the first service to start on it
 * claims it, and a service of another namespace refuses to start (`claimNamespace`). Two
 * namespaces on one database each acted on the other's tasks — one's relay took the shared lock
 * and checkpoint and published the other's events to its own streams (nobody listening: tasks
 * stalled, their webhooks lost), one's watchdog re-fed the other's tasks.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table if not exists deployment (
      id         smallint    primary key default 1 check (id = 1),
      namespace  text        not null,
      claimed_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists deployment`.execute(db);
}
