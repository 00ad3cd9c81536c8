import { sql, type Kysely } from 'kysely';

/**
 * At most one open redelivery request per delivery: asking again while one is queued (a
 * double-click on "Send again", two people at once) is the same request, not a second mail or
 * webhook. Requests already queued twice are folded into the first.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    update webhook_redeliveries r set done_at = now()
     where done_at is null
       and exists (select 1 from webhook_redeliveries o where o.delivery_id = r.delivery_id and o.done_at is null and o.id < r.id)`.execute(db);
  await sql`create unique index webhook_redeliveries_one_open on webhook_redeliveries (delivery_id) where done_at is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists webhook_redeliveries_one_open`.execute(db);
}
