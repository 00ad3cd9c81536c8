import { indexCorpus, readArtifact, readArtifactVersion, searchCorpus, storeArtifact } from '@baton/storage';
import type { Logger } from '@baton/runtime';
import { E2BSandboxProvider, LocalSandboxProvider, type SandboxProvider, type TaskLiveness } from '@baton/sandbox';
import type pg from 'pg';
import type { RunnerConfig } from './config.ts';
import type { ArtifactStore } from './subagent.ts';

/** E2B when configured (or asked for), else the local bubblewrap provider. */
export function sandboxProviderFromConfig(c: RunnerConfig, pool: pg.Pool, log: Logger): SandboxProvider {
  const e2b = c.SANDBOX_PROVIDER === 'e2b' || (c.SANDBOX_PROVIDER === 'auto' && c.E2B_API_KEY);
  if (e2b) {
    if (!c.E2B_API_KEY) throw new Error('SANDBOX_PROVIDER=e2b needs E2B_API_KEY');
    log.info({ template: c.E2B_TEMPLATE }, 'sandboxes: E2B');
    return new E2BSandboxProvider({ pool, apiKey: c.E2B_API_KEY, template: c.E2B_TEMPLATE, ...(c.E2B_API_URL ? { apiUrl: c.E2B_API_URL } : {}), ...(c.E2B_SANDBOX_URL ? { sandboxUrl: c.E2B_SANDBOX_URL } : {}) });
  }
  const named = (v: string | undefined): string | null | undefined => (v === 'none' ? null : v);
  const toolchain = { node: named(c.SANDBOX_TOOLCHAIN_NODE), nodeModules: named(c.SANDBOX_TOOLCHAIN_NODE_MODULES) };
  const local = new LocalSandboxProvider({ root: c.WORKSPACE_ROOT, pool, toolchain, maxWorkspaceBytes: c.SANDBOX_MAX_WORKSPACE_BYTES });
  if (!local.toolchain.nodeModules) log.warn({ toolchain: local.toolchain }, 'sandboxes: no node_modules with vitest to lend (SANDBOX_TOOLCHAIN_NODE_MODULES): test commands that need vitest will fail');
  if (local.canRunCommands) log.info({ root: c.WORKSPACE_ROOT, toolchain: local.toolchain }, 'sandboxes: local (bubblewrap)');
  else log.warn({ root: c.WORKSPACE_ROOT }, 'sandboxes: local WITHOUT bubblewrap: file tools work, run_command/run_tests are refused (apt-get install bubblewrap)');
  return local;
}

export function artifactStore(pool: pg.Pool): ArtifactStore {
  return {
    store: (a) => storeArtifact(pool, a),
    read: async (taskId, path, sha256) => (sha256 ? await readArtifactVersion(pool, taskId, sha256) : null) ?? (await readArtifact(pool, taskId, path))?.content ?? null,
  };
}

/** Which of these tasks this deployment's log knows, live or finished (completed, failed or cancelled); unknown ones are absent. */
export function taskLiveness(pool: pg.Pool): TaskLiveness {
  return async (taskIds) => {
    const { rows } = await pool.query(`select id, status in ('completed', 'failed', 'cancelled') as finished from tasks where id = any($1::uuid[])`, [taskIds]);
    return new Map(rows.map((r) => [r.id as string, r.finished ? 'finished' : 'live']));
  };
}

/** Sweep now and then every interval; returns a stop function. Errors are logged, never thrown. */
export function startSweeper(provider: SandboxProvider, pool: pg.Pool, intervalMs: number, log: Logger): () => void {
  let sweeping = false;
  const sweep = async (): Promise<void> => {
    if (sweeping) return; // the last one still at it (E2B slow or away): not two at once
    sweeping = true;
    try {
      const n = await provider.sweep(taskLiveness(pool));
      if (n > 0) log.info({ swept: n }, 'orphaned sandboxes killed');
    } catch (err) {
      log.warn({ err }, 'sandbox sweep failed');
    } finally {
      sweeping = false;
    }
  };
  void sweep();
  if (intervalMs === 0) return () => {};
  const t = setInterval(() => void sweep(), intervalMs);
  t.unref();
  return () => clearInterval(t);
}

/** Index the offline web_search corpus (only what changed); web_search then queries it. */
export async function prepareSearch(pool: pg.Pool, corpus: string, dir: string, log: Logger) {
  const r = await indexCorpus(pool, corpus, dir);
  log.info({ corpus, dir, ...r }, 'web_search corpus indexed');
  return (query: string, limit: number) => searchCorpus(pool, corpus, query, limit);
}
