import { sql, type Kysely } from 'kysely';

/**
 * Self-healing (see docs/self-healing.md):
 * - `tasks.watch_since`: set while a task has work that no person holds (its lead must act, or
 *   an agent is dispatched or running) — the time of the task's last transition. The watchdog
 *   looks at tasks whose `watch_since` is older than its grace.
 * - `agent_leases`: a runner holds one per agent it runs, renewed while it works; an expired one
 *   is taken over. The watchdog counts its re-dispatches (`fires`) in the same row.
 * - `bus_streams`: the creation time of each JetStream stream the log was last relayed into; a
 *   different one means the bus lost what it held and the log re-feeds it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table tasks add column watch_since timestamptz`.execute(db);
  await sql`create index tasks_watch_since_idx on tasks (watch_since) where watch_since is not null`.execute(db);
  await sql`
    create table agent_leases (
      task_id    uuid        not null,
      agent_id   text        not null,
      attempt    integer     not null,
      holder     text        not null,
      expires_at timestamptz not null,
      fires      integer     not null default 0,
      last_error text,
      updated_at timestamptz not null default now(),
      primary key (task_id, agent_id)
    )`.execute(db);
  await sql`create index agent_leases_expires_idx on agent_leases (expires_at)`.execute(db);
  await sql`
    create table bus_streams (
      name    text primary key,
      created text not null,
      seen_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table bus_streams`.execute(db);
  await sql`drop table agent_leases`.execute(db);
  await sql`alter table tasks drop column watch_since`.execute(db);
}
