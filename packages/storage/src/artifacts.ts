import { createHash } from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';
import { inTransaction } from '@baton/db';
import { looksBinary } from '@baton/domain';

export interface StoredArtifact {
  path: string;
  agentId: string | null;
  bytes: number;
  sha256: string;
  mediaType: string;
}

const MEDIA_TYPES: Record<string, string> = {
  '.md': 'text/markdown; charset=utf-8',
  '.markdown': 'text/markdown; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.json': 'application/json',
  '.csv': 'text/csv; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.ts': 'text/plain; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.py': 'text/x-python; charset=utf-8',
  '.yaml': 'application/yaml',
  '.yml': 'application/yaml',
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.pdf': 'application/pdf',
};

/** A file's media type from its extension; unknown text is served as plain text, anything else as bytes. */
export function mediaTypeOf(file: string, content?: Uint8Array): string {
  const known = MEDIA_TYPES[path.extname(file).toLowerCase()];
  if (known) return known;
  if (content && !looksBinary(content)) return 'text/plain; charset=utf-8';
  return 'application/octet-stream';
}

/** Both the path and `<agentId>/<path>` are other agents' files (an agent wrote one under the other's name): this file cannot be kept. */
export class ArtifactPathHeldError extends Error {
  readonly path: string;
  constructor(path: string, alternative: string) {
    super(`another agent's file holds ${path}, and another's ${alternative}`);
    this.name = new.target.name;
    this.path = path;
  }
}

/**
 * Store a file's bytes as an artifact of a task (idempotent: the same agent storing the same
 * path again replaces its own row). A path already held by another agent's artifact (two
 * researchers' notes.md, finishing at once) is kept under the agent's id instead
 * (`researcher-2/notes.md`); the table's key settles the race. Returns what `ArtifactStored`
 * records, with the path actually used; the bytes stay in this table.
 */
export async function storeArtifact(pool: pg.Pool, a: { taskId: string; path: string; agentId: string | null; content: Buffer; owned?: boolean }): Promise<StoredArtifact> {
  const sha256 = createHash('sha256').update(a.content).digest('hex');
  const mediaType = mediaTypeOf(a.path, a.content);
  // `owned`: the agent holds a lock on the path (a subtask of a plan), so its version is the
  // task's version of the file, whoever wrote it before (an earlier round, a dependency).
  // Every version is kept by its hash as well (artifact_versions): what a fork copies as of its point.
  const put = async (file: string): Promise<boolean> => {
    const r = await pool.query(
      `with version as (insert into artifact_versions (task_id, sha256, content) values ($1, $5, $7) on conflict do nothing)
       insert into artifacts (task_id, path, agent_id, bytes, sha256, media_type, content) values ($1, $2, $3, $4, $5, $6, $7)
       on conflict (task_id, path) do update set agent_id = excluded.agent_id, bytes = excluded.bytes, sha256 = excluded.sha256, media_type = excluded.media_type, content = excluded.content
         where $8 or artifacts.agent_id is not distinct from excluded.agent_id
       returning path`,
      [a.taskId, file, a.agentId, a.content.length, sha256, mediaType, a.content, a.owned === true],
    );
    return r.rowCount === 1;
  };
  let file = a.path;
  if (!(await put(file))) {
    file = `${a.agentId ?? 'task'}/${a.path}`;
    if (!(await put(file))) throw new ArtifactPathHeldError(a.path, file);
  }
  return { path: file, agentId: a.agentId, bytes: a.content.length, sha256, mediaType };
}

export async function readArtifact(pool: pg.Pool, taskId: string, file: string): Promise<(StoredArtifact & { content: Buffer }) | null> {
  const { rows } = await pool.query('select path, agent_id, bytes, sha256, media_type, content from artifacts where task_id = $1 and path = $2', [taskId, file]);
  const r = rows[0];
  return r ? { path: r.path, agentId: r.agent_id, bytes: r.bytes, sha256: r.sha256, mediaType: r.media_type, content: r.content } : null;
}

/** The content an artifact had in one version (its `ArtifactStored.sha256`), or null when that version was not kept. */
export async function readArtifactVersion(pool: pg.Pool, taskId: string, sha256: string): Promise<Buffer | null> {
  const { rows } = await pool.query<{ content: Buffer }>('select content from artifact_versions where task_id = $1 and sha256 = $2', [taskId, sha256]);
  return rows[0]?.content ?? null;
}

/**
 * A fork's files (`forkFiles` in the domain says which): the artifacts its copied history names,
 * each in the version it names last (the content as it was at the fork point; one stored before
 * versions were kept, and since replaced, comes as it is now), every version the history names
 * (`versions`: what `?at=` and a rebuilt workspace read), and the workspaces of sandboxes still
 * live on the source (paused ones above all, so a forked agent resumes with its workspace) —
 * but not of agents that recorded anything after the fork point (`movedOn`): a workspace is not
 * versioned with the log, so theirs holds changes the fork's history does not, and the fork's
 * agent rebuilds its workspace from the log instead. Run before the fork's events are written.
 */
export async function copyTaskFiles(pool: pg.Pool, from: string, to: string, files: { artifacts: readonly StoredArtifact[]; versions: readonly string[]; movedOn: readonly string[] }): Promise<void> {
  const { artifacts } = files;
  await inTransaction(pool, async (client) => {
    if (artifacts.length > 0) {
      await client.query(
        `insert into artifacts (task_id, path, agent_id, bytes, sha256, media_type, content)
         select $2::uuid, x.path, x.agent_id, length(c.content), c.sha256, x.media_type, c.content
         from unnest($3::text[], $4::text[], $5::text[], $6::text[]) as x(path, agent_id, sha256, media_type)
         cross join lateral (
           (select v.sha256, v.content from artifact_versions v where v.task_id = $1::uuid and v.sha256 = x.sha256)
           union all
           (select a.sha256, a.content from artifacts a where a.task_id = $1::uuid and a.path = x.path)
           limit 1) c
         on conflict do nothing`,
        [from, to, artifacts.map((a) => a.path), artifacts.map((a) => a.agentId), artifacts.map((a) => a.sha256), artifacts.map((a) => a.mediaType)],
      );
      await client.query(`insert into artifact_versions (task_id, sha256, content) select task_id, sha256, content from artifacts where task_id = $1::uuid on conflict do nothing`, [to]);
    }
    if (files.versions.length > 0) {
      await client.query(
        `insert into artifact_versions (task_id, sha256, content) select $2::uuid, sha256, content from artifact_versions where task_id = $1::uuid and sha256 = any($3::text[]) on conflict do nothing`,
        [from, to, files.versions],
      );
    }
    await client.query(
      `insert into sandboxes (id, task_id, agent_id, provider, state, attempt, generation)
       select $2::text || '/' || agent_id, $2::uuid, agent_id, provider, 'paused', attempt, generation from sandboxes
        where task_id = $1::uuid and state <> 'killed' and provider = 'local' and agent_id <> all($3::text[])
       on conflict do nothing`,
      [from, to, files.movedOn],
    );
    await client.query(
      `insert into sandbox_files (sandbox_id, path, mode, content)
       select $2::text || '/' || s.agent_id, f.path, f.mode, f.content from sandboxes s join sandbox_files f on f.sandbox_id = s.id
        where s.task_id = $1::uuid and s.state <> 'killed' and s.provider = 'local' and s.agent_id <> all($3::text[])
       on conflict do nothing`,
      [from, to, files.movedOn],
    );
  });
}

/** A recorded artifact version whose bytes are not kept (replaced before every version was kept, migration 013). */
export class ArtifactVersionNotKeptError extends Error {
  readonly path: string;
  constructor(taskId: string, path: string, sha256: string) {
    super(`artifact '${path}' of task ${taskId}: the version recorded (sha256 ${sha256.slice(0, 12)}…) is not kept (it was replaced before Baton kept every version)`);
    this.name = new.target.name;
    this.path = path;
  }
}

/**
 * The bytes of the given recorded artifacts, each in the version its `ArtifactStored` names (by
 * path): what the task's files were at the state they come from, current or earlier.
 * Throws ArtifactVersionNotKeptError when a version's bytes are not kept.
 */
export async function readArtifacts(pool: pg.Pool, taskId: string, artifacts: readonly Pick<StoredArtifact, 'path' | 'sha256'>[]): Promise<Map<string, Buffer>> {
  if (artifacts.length === 0) return new Map();
  const { rows } = await pool.query<{ sha256: string; content: Buffer }>('select sha256, content from artifact_versions where task_id = $1 and sha256 = any($2::text[])', [
    taskId,
    [...new Set(artifacts.map((a) => a.sha256))],
  ]);
  const bySha = new Map(rows.map((r) => [r.sha256, r.content]));
  const out = new Map<string, Buffer>();
  for (const a of artifacts) {
    const content = bySha.get(a.sha256);
    if (content === undefined) throw new ArtifactVersionNotKeptError(taskId, a.path, a.sha256);
    out.set(a.path, content);
  }
  return out;
}
