import { sql, type Kysely } from 'kysely';

/** Read models and processor bookkeeping. Everything here can be rebuilt from the log. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table tasks (
      id               uuid primary key,
      tenant_id        text        not null,
      status           text        not null,
      team             text        not null,
      title            text        not null,
      created_at       timestamptz not null,
      updated_at       timestamptz not null,
      version          integer     not null,
      pending_requests jsonb       not null default '[]'::jsonb
    )`.execute(db);
  await sql`create index tasks_tenant_created_idx on tasks (tenant_id, created_at desc, id desc)`.execute(db);
  await sql`create index tasks_tenant_status_created_idx on tasks (tenant_id, status, created_at desc, id desc)`.execute(db);
  await sql`
    create table processor_checkpoints (
      processor_id    text primary key,
      transaction_id  xid8        not null,
      global_position bigint      not null,
      updated_at      timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table dead_letters (
      id              bigint generated always as identity primary key,
      consumer        text        not null,
      subject         text        not null,
      stream_sequence bigint      not null,
      deliveries      integer     not null,
      payload         text        not null,
      error           text        not null,
      recorded_at     timestamptz not null default now(),
      constraint dead_letters_uq unique (consumer, stream_sequence)
    )`.execute(db);
  await sql`
    create table webhook_deliveries (
      id           bigint generated always as identity primary key,
      task_id      uuid        not null,
      event_id     uuid        not null,
      webhook_id   text        not null,
      type         text        not null,
      url          text        not null,
      attempt      integer     not null,
      status_code  integer,
      ok           boolean     not null,
      error        text,
      duration_ms  integer     not null,
      attempted_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index webhook_deliveries_task_idx on webhook_deliveries (task_id, id)`.execute(db);
}
