import { sql, type Kysely } from 'kysely';

/**
 * Chat mode (docs/chat.md): every chat's events, append-only, in a table of their own — not in
 * `events`, whose every reader (the relay's tail, task loading and caches, the watchdog, the
 * `tasks` read model) takes each row for a task's. A chat is one stream: versions 1, 2, … per
 * `chat_id`, guarded by the unique (chat_id, version); `tenant_id` is the chat's tenant on every
 * row (tenancy checks and listing without reading the events' data).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table chat_events (
      global_position bigint generated always as identity primary key,
      chat_id         uuid        not null,
      version         integer     not null check (version > 0),
      tenant_id       text        not null,
      event_id        uuid        not null,
      type            text        not null,
      data            jsonb       not null,
      metadata        jsonb       not null default '{}'::jsonb,
      recorded_at     timestamptz not null default now(),
      constraint chat_events_version_uq unique (chat_id, version),
      constraint chat_events_event_id_uq unique (event_id)
    )`.execute(db);
  await sql`create index chat_events_tenant_idx on chat_events (tenant_id, recorded_at desc)`.execute(db);
  // The same guard as the task log's (events_append_only, migration 001).
  await sql`create trigger chat_events_no_update_delete before update or delete on chat_events for each row execute function events_append_only()`.execute(db);
  await sql`create trigger chat_events_no_truncate before truncate on chat_events for each statement execute function events_append_only()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table chat_events`.execute(db);
}
