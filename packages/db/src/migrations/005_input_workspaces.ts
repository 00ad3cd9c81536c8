import { sql, type Kysely } from 'kysely';

/**
 * Input workspaces: the files a task starts from (an upload or a configured example),
 * content-addressed by `digest` (sha256 over the sorted (path, mode, content digest) list, so the
 * same files are stored once however often they are submitted). `TaskSubmitted.workspace`
 * records the digest; the bytes live here and are never changed — a row set is written once,
 * in one transaction with its header row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table input_workspaces (
      digest     text        primary key check (digest ~ '^[0-9a-f]{64}$'),
      files      integer     not null check (files >= 0),
      bytes      bigint      not null check (bytes >= 0),
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table input_workspace_files (
      digest  text    not null references input_workspaces (digest) on delete cascade,
      path    text    not null,
      mode    integer not null check (mode between 0 and 511),
      content bytea   not null,
      primary key (digest, path)
    )`.execute(db);
}
