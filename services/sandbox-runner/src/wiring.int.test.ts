import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { handleCommand } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { DEFAULT_LIMITS, LocalSandboxProvider } from '@baton/sandbox';
import { pgTest as test, waitFor } from '@baton/testing';
import { describe, expect } from 'vitest';
import { startSweeper, taskLiveness } from './wiring.ts';

describe('the sandbox sweeper', () => {
  test("kills its sandboxes of tasks that ended (or never existed) and keeps those of live tasks; never touches files of a task it does not know (another deployment's on the same root)", async ({ pg }) => {
    const root = await mkdtemp(path.join(tmpdir(), 'baton-sweep-'));
    try {
      const submit = async (): Promise<string> => {
        const id = randomUUID();
        await handleCommand(pg.store, id, { type: 'SubmitTask', prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
        return id;
      };
      const live = await submit();
      const cancelled = await submit();
      await handleCommand(pg.store, cancelled, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
      const unknown = randomUUID();
      expect(await taskLiveness(pg.db.pool)([live, cancelled, unknown])).toEqual(new Map([[live, 'live'], [cancelled, 'finished']]));
      const provider = new LocalSandboxProvider({ root, pool: pg.db.pool });
      for (const taskId of [live, cancelled, unknown]) await (await provider.open({ taskId, agentId: 'researcher-1', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 })).files.write('a.txt', 'x');
      // Another deployment's engineer at work under the same root (its own database): not in this registry, not in this log.
      const foreign = randomUUID();
      await mkdir(path.join(root, foreign, 'engineer-1'), { recursive: true });
      await writeFile(path.join(root, foreign, 'engineer-1', 'app.ts'), 'export {};');
      // Files of a finished task of this deployment that no registry row names any more (a crash between the two): removed.
      const finished = await submit();
      await handleCommand(pg.store, finished, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
      await mkdir(path.join(root, finished, 'researcher-1'), { recursive: true });
      const stop = startSweeper(provider, pg.db.pool, 0, silentLogger());
      stop();
      // The sweep's last step is the registry: once both ended sandboxes say killed, it is done.
      const states = async () => (await pg.db.pool.query('select task_id, state from sandboxes')).rows.map((r) => `${r.task_id === live ? 'live' : 'ended'}:${r.state}`).sort().join();
      await waitFor(async () => (await states()) === 'ended:killed,ended:killed,live:running', { what: 'the sweep' });
      await waitFor(async () => !(await readdir(root)).includes(finished), { what: 'the finished task\'s files removed' });
      expect((await readdir(root)).sort()).toEqual([live, foreign].sort());
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
