import { sql, type Kysely } from 'kysely';

/**
 * What the notifiers gave up on, across a tenant's tasks (`GET /v1/deliveries?givenUp=true`): an
 * operator paged by `BatonDeliveriesGivenUp` finds the messages without knowing their tasks. A
 * partial index: given-up attempts are few beside all the others.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index webhook_deliveries_given_up_idx on webhook_deliveries (id desc) where given_up`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index webhook_deliveries_given_up_idx`.execute(db);
}
