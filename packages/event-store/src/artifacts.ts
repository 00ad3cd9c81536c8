import { createHash } from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';

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
  if (content && !content.subarray(0, 8000).includes(0)) return 'text/plain; charset=utf-8';
  return 'application/octet-stream';
}

/**
 * Store a file's bytes as an artifact of a task (idempotent: the same path and bytes again
 * change nothing). Returns what `ArtifactStored` records; the bytes stay in this table.
 */
export async function storeArtifact(pool: pg.Pool, a: { taskId: string; path: string; agentId: string | null; content: Buffer }): Promise<StoredArtifact> {
  const sha256 = createHash('sha256').update(a.content).digest('hex');
  const mediaType = mediaTypeOf(a.path, a.content);
  await pool.query(
    `insert into artifacts (task_id, path, agent_id, bytes, sha256, media_type, content) values ($1, $2, $3, $4, $5, $6, $7)
     on conflict (task_id, path) do update set agent_id = excluded.agent_id, bytes = excluded.bytes, sha256 = excluded.sha256, media_type = excluded.media_type, content = excluded.content`,
    [a.taskId, a.path, a.agentId, a.content.length, sha256, mediaType, a.content],
  );
  return { path: a.path, agentId: a.agentId, bytes: a.content.length, sha256, mediaType };
}

export async function listArtifacts(pool: pg.Pool, taskId: string): Promise<StoredArtifact[]> {
  const { rows } = await pool.query('select path, agent_id, bytes, sha256, media_type from artifacts where task_id = $1 order by path', [taskId]);
  return rows.map((r) => ({ path: r.path, agentId: r.agent_id, bytes: r.bytes, sha256: r.sha256, mediaType: r.media_type }));
}

export async function readArtifact(pool: pg.Pool, taskId: string, file: string): Promise<(StoredArtifact & { content: Buffer }) | null> {
  const { rows } = await pool.query('select path, agent_id, bytes, sha256, media_type, content from artifacts where task_id = $1 and path = $2', [taskId, file]);
  const r = rows[0];
  return r ? { path: r.path, agentId: r.agent_id, bytes: r.bytes, sha256: r.sha256, mediaType: r.media_type, content: r.content } : null;
}
