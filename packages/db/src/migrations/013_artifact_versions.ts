import { sql, type Kysely } from 'kysely';

/**
 * Every content a task's artifacts have had, by hash (`artifact_versions`): `artifacts` holds each
 * path's current content, and an artifact stored again (a round of changes rewrites a file)
 * replaces it there. The log names each version (`ArtifactStored.sha256`), so a fork copies each
 * artifact as its copied history names it — as it was at the fork point, not as it is now.
 * Filled from then on by every store; the artifacts stored before are backfilled (their
 * earlier contents were not kept).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table if not exists artifact_versions (
      task_id    uuid        not null,
      sha256     text        not null,
      content    bytea       not null,
      stored_at  timestamptz not null default now(),
      primary key (task_id, sha256)
    )`.execute(db);
  await sql`insert into artifact_versions (task_id, sha256, content) select task_id, sha256, content from artifacts on conflict do nothing`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists artifact_versions`.execute(db);
}
