import { sql, type Kysely } from 'kysely';

/**
 * A dead letter is one message: its consumer, its stream sequence and the time the stream stored
 * it (`stored_at`, NATS's stamp, the same on every delivery). The sequence alone was the key, but a
 * stream deleted and made again (a bus wipe; the relay re-feeds it from the log) numbers its
 * messages from 1 again, and the new message's dead letter was dropped as a duplicate of an old
 * one — unrecorded, and not counted toward giving its work up. Rows recorded before have no
 * stored time (null: never a duplicate of anything).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table dead_letters add column if not exists stored_at timestamptz`.execute(db);
  await sql`alter table dead_letters drop constraint if exists dead_letters_uq`.execute(db);
  await sql`alter table dead_letters add constraint dead_letters_message_uq unique (consumer, stream_sequence, stored_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table dead_letters drop constraint if exists dead_letters_message_uq`.execute(db);
  await sql`alter table dead_letters drop column if exists stored_at`.execute(db);
  await sql`alter table dead_letters add constraint dead_letters_uq unique (consumer, stream_sequence)`.execute(db);
}
