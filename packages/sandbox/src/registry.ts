import { inTransaction } from '@baton/db';
import type pg from 'pg';
import { SandboxFencedError } from './provider.ts';

export interface SandboxRow {
  id: string;
  taskId: string;
  agentId: string;
  provider: string;
  externalId: string | null;
  state: 'running' | 'paused' | 'killed';
  attempt: number;
  generation: number;
}

/** The deployment and namespace a provider's sandboxes are tagged with (E2B metadata). */
export interface SandboxOwner {
  deployment: string;
  namespace: string;
}

export interface StoredFile {
  path: string;
  mode: number;
  content: Buffer;
}

const rowOf = (r: Record<string, unknown>): SandboxRow => ({
  id: r.id as string,
  taskId: r.task_id as string,
  agentId: r.agent_id as string,
  provider: r.provider as string,
  externalId: (r.external_id as string | null) ?? null,
  state: r.state as SandboxRow['state'],
  attempt: r.attempt as number,
  generation: Number(r.generation),
});

/** The files' bytes one statement of saveFiles carries at most (a file larger than this goes alone). */
export const SAVE_BATCH_BYTES = 32 * 1024 * 1024;

/**
 * Where sandboxes are known centrally (the `sandboxes` table): which provider holds each, its
 * external id (E2B), its state and — for the local provider — the synced workspace files.
 * Every write names the attempt that makes it; a newer attempt fences older ones out, so a
 * runner that lost its job can never overwrite the workspace of the one that took it over.
 */
export class SandboxRegistry {
  private readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** Register (or re-open) a sandbox for this attempt; throws SandboxFencedError if a newer attempt has it. */
  async claim(id: string, taskId: string, agentId: string, provider: string, attempt: number): Promise<SandboxRow> {
    const { rows } = await this.pool.query(
      `insert into sandboxes (id, task_id, agent_id, provider, state, attempt) values ($1, $2, $3, $4, 'running', $5)
       on conflict (id) do update set attempt = excluded.attempt, state = 'running', updated_at = now()
         where sandboxes.attempt <= excluded.attempt
       returning *`,
      [id, taskId, agentId, provider, attempt],
    );
    if (rows.length === 0) throw new SandboxFencedError(id, attempt);
    return rowOf(rows[0]);
  }

  async get(id: string): Promise<SandboxRow | null> {
    const { rows } = await this.pool.query('select * from sandboxes where id = $1', [id]);
    return rows[0] ? rowOf(rows[0]) : null;
  }

  async setExternalId(id: string, attempt: number, externalId: string): Promise<void> {
    const r = await this.pool.query('update sandboxes set external_id = $3, updated_at = now() where id = $1 and attempt = $2', [id, attempt, externalId]);
    if (r.rowCount === 0) throw new SandboxFencedError(id, attempt);
  }

  async setState(id: string, state: SandboxRow['state']): Promise<void> {
    await this.pool.query('update sandboxes set state = $2, updated_at = now() where id = $1', [id, state]);
  }

  /** The synced files of a workspace and its generation. */
  async loadFiles(id: string): Promise<{ generation: number; files: StoredFile[] }> {
    return inTransaction(
      this.pool,
      async (client) => {
        const g = await client.query('select generation from sandboxes where id = $1', [id]);
        const f = await client.query('select path, mode, content from sandbox_files where sandbox_id = $1 order by path', [id]);
        return { generation: Number(g.rows[0]?.generation ?? 0), files: f.rows.map((r) => ({ path: r.path as string, mode: r.mode as number, content: r.content as Buffer })) };
      },
      'begin isolation level repeatable read read only',
    );
  }

  /**
   * Write the changed and removed files of a workspace, fenced by attempt; returns the new
   * generation. One statement (one round trip) when the files are small; past SAVE_BATCH_BYTES,
   * one transaction whose inserts go in batches (a statement's parameters are one string in the
   * driver: 300 MB of files were a RangeError, and the sync failed for good).
   */
  async saveFiles(id: string, attempt: number, changed: readonly StoredFile[], removed: readonly string[]): Promise<number> {
    const bytes = changed.reduce((n, f) => n + f.content.length, 0);
    if (bytes > SAVE_BATCH_BYTES) return this.saveFilesInBatches(id, attempt, changed, removed);
    // The fenced generation bump gates the delete and the upsert.
    const { rows } = await this.pool.query(
      `with g as (update sandboxes set generation = generation + 1, updated_at = now() where id = $1 and attempt = $2 returning generation),
            d as (delete from sandbox_files where sandbox_id = $1 and path = any($3::text[]) and exists (select 1 from g)),
            i as (insert into sandbox_files (sandbox_id, path, mode, content)
                  select $1, p, m, c from unnest($4::text[], $5::int[], $6::bytea[]) as t(p, m, c) where exists (select 1 from g)
                  on conflict (sandbox_id, path) do update set mode = excluded.mode, content = excluded.content)
       select generation from g`,
      [id, attempt, removed, changed.map((f) => f.path), changed.map((f) => f.mode), changed.map((f) => f.content)],
    );
    if (rows.length === 0) throw new SandboxFencedError(id, attempt);
    return Number(rows[0].generation);
  }

  private saveFilesInBatches(id: string, attempt: number, changed: readonly StoredFile[], removed: readonly string[]): Promise<number> {
    return inTransaction(this.pool, async (client) => {
      const g = await client.query('update sandboxes set generation = generation + 1, updated_at = now() where id = $1 and attempt = $2 returning generation', [id, attempt]);
      if (g.rows.length === 0) throw new SandboxFencedError(id, attempt);
      await client.query('delete from sandbox_files where sandbox_id = $1 and path = any($2::text[])', [id, removed]);
      for (let i = 0; i < changed.length; ) {
        const batch: StoredFile[] = [];
        for (let size = 0; i < changed.length && (batch.length === 0 || size + (changed[i] as StoredFile).content.length <= SAVE_BATCH_BYTES); i++) {
          batch.push(changed[i] as StoredFile);
          size += (changed[i] as StoredFile).content.length;
        }
        await client.query(
          `insert into sandbox_files (sandbox_id, path, mode, content) select $1, p, m, c from unnest($2::text[], $3::int[], $4::bytea[]) as t(p, m, c)
           on conflict (sandbox_id, path) do update set mode = excluded.mode, content = excluded.content`,
          [id, batch.map((f) => f.path), batch.map((f) => f.mode), batch.map((f) => f.content)],
        );
      }
      return Number(g.rows[0].generation);
    });
  }

  /** Forget a sandbox's files and mark it killed. */
  async killed(id: string): Promise<void> {
    await this.pool.query(`with f as (delete from sandbox_files where sandbox_id = $1) update sandboxes set state = 'killed', updated_at = now() where id = $1`, [id]);
  }

  /** The rows of these sandboxes (any state), by id. */
  async byIds(ids: readonly string[]): Promise<Map<string, SandboxRow>> {
    if (ids.length === 0) return new Map();
    const { rows } = await this.pool.query('select * from sandboxes where id = any($1::text[])', [ids]);
    return new Map(rows.map((r) => [r.id as string, rowOf(r)]));
  }

  private claimed: SandboxOwner | null = null;
  /**
   * Whose sandboxes these are: this database's deployment id (migration 023) and namespace, as
   * every service claims them at start (null before any has; read once). A provider tags its
   * sandboxes with both, to find its own among others' — a copy of the database keeps the id,
   * and runs beside the original on a namespace of its own.
   */
  async owner(): Promise<SandboxOwner | null> {
    if (this.claimed) return this.claimed;
    const { rows } = await this.pool.query<SandboxOwner>('select deployment_id::text as deployment, namespace from deployment where id = 1');
    this.claimed = rows[0] ?? null;
    return this.claimed;
  }

  /** Sandboxes not yet killed, of this provider. */
  async live(provider: string): Promise<SandboxRow[]> {
    const { rows } = await this.pool.query(`select * from sandboxes where provider = $1 and state <> 'killed'`, [provider]);
    return rows.map(rowOf);
  }
}
