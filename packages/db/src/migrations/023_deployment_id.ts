import { sql, type Kysely } from 'kysely';

/**
 * A deployment's identity: its database's own random id, written into the description of the
 * NATS streams its services make. Two databases given one BATON_NAMESPACE on one NATS server
 * shared streams and consumers — each one's runners took the other's jobs (a task not in its
 * database: the job dropped), each one's orchestrator the other's events — and every service
 * said ready. With the id on the streams, a service whose database is another deployment than
 * the one that made them refuses to start (`ensureTopology`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table deployment add column deployment_id uuid not null default gen_random_uuid()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table deployment drop column deployment_id`.execute(db);
}
