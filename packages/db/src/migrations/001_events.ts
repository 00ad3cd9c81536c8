import { sql, type Kysely } from 'kysely';

/** The append-only event log of DESIGN.md. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table events (
      global_position bigint generated always as identity primary key,
      stream_id       text        not null,
      stream_version  integer     not null check (stream_version > 0),
      task_id         uuid        not null,
      event_id        uuid        not null,
      type            text        not null,
      schema_version  integer     not null default 1,
      data            jsonb       not null,
      metadata        jsonb       not null default '{}'::jsonb,
      recorded_at     timestamptz not null default now(),
      transaction_id  xid8        not null default pg_current_xact_id(),
      constraint events_stream_version_uq unique (stream_id, stream_version),
      constraint events_event_id_uq unique (event_id)
    )`.execute(db);
  await sql`create index events_task_idx on events (task_id, global_position)`.execute(db);
  await sql`create index events_tx_position_idx on events (transaction_id, global_position)`.execute(db);
  await sql`
    create function events_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'events is append-only: % is not allowed', tg_op using errcode = 'restrict_violation';
    end $$`.execute(db);
  await sql`create trigger events_no_update_delete before update or delete on events for each row execute function events_append_only()`.execute(db);
  await sql`create trigger events_no_truncate before truncate on events for each statement execute function events_append_only()`.execute(db);
}
