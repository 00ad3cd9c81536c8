import { sql, type Kysely } from 'kysely';

/**
 * What agents produce and work in, kept centrally so that any runner replica can carry on:
 * - `artifacts`: files stored from agents' workspaces (the report above all), recorded in the
 *   log by `ArtifactStored` (which holds the digest; the bytes live here).
 * - `sandboxes` + `sandbox_files`: each agent's sandbox, with its workspace synced after
 *   every step (`generation` counts syncs; `attempt` fences an older runner out).
 * - `corpus_documents`: the offline web_search corpus, full-text indexed.
 * - `team_configs`: every team definition a service has loaded, by config version, so a run
 *   finishes with the config it started with (pinned in TaskStarted).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table artifacts (
      task_id    uuid        not null,
      path       text        not null,
      agent_id   text,
      bytes      integer     not null,
      sha256     text        not null,
      media_type text        not null,
      content    bytea       not null,
      created_at timestamptz not null default now(),
      primary key (task_id, path)
    )`.execute(db);
  await sql`
    create table sandboxes (
      id          text        primary key,
      task_id     uuid        not null,
      agent_id    text        not null,
      provider    text        not null,
      external_id text,
      state       text        not null check (state in ('running', 'paused', 'killed')),
      attempt     integer     not null default 0,
      generation  bigint      not null default 0,
      created_at  timestamptz not null default now(),
      updated_at  timestamptz not null default now()
    )`.execute(db);
  await sql`create index sandboxes_live_idx on sandboxes (task_id) where state <> 'killed'`.execute(db);
  await sql`
    create table sandbox_files (
      sandbox_id text    not null references sandboxes (id) on delete cascade,
      path       text    not null,
      mode       integer not null,
      content    bytea   not null,
      primary key (sandbox_id, path)
    )`.execute(db);
  await sql`
    create table corpus_documents (
      corpus  text not null,
      path    text not null,
      title   text not null,
      body    text not null,
      digest  text not null,
      tsv     tsvector generated always as (setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', body), 'B')) stored,
      primary key (corpus, path)
    )`.execute(db);
  await sql`create index corpus_documents_tsv_idx on corpus_documents using gin (tsv)`.execute(db);
  await sql`
    create table team_configs (
      version    text        primary key,
      team_id    text        not null,
      definition jsonb       not null,
      created_at timestamptz not null default now()
    )`.execute(db);
}
