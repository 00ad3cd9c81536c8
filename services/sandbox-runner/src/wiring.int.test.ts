import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { handleCommand } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { DEFAULT_LIMITS, LocalSandboxProvider } from '@baton/sandbox';
import { pgTest as test, waitFor } from '@baton/testing';
import { describe, expect } from 'vitest';
import { liveTasks, startSweeper } from './wiring.ts';

describe('the sandbox sweeper', () => {
  test('kills the sandboxes of tasks that ended (or never existed) and keeps those of live tasks', async ({ pg }) => {
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
      expect(await liveTasks(pg.db.pool)([live, cancelled, unknown])).toEqual(new Set([live]));
      const provider = new LocalSandboxProvider({ root, pool: pg.db.pool });
      for (const taskId of [live, cancelled, unknown]) await (await provider.open({ taskId, agentId: 'researcher-1', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 })).files.write('a.txt', 'x');
      const stop = startSweeper(provider, pg.db.pool, 0, silentLogger());
      stop();
      // The sweep's last step is the registry: once both ended sandboxes say killed, it is done.
      const states = async () => (await pg.db.pool.query('select task_id, state from sandboxes')).rows.map((r) => `${r.task_id === live ? 'live' : 'ended'}:${r.state}`).sort().join();
      await waitFor(async () => (await states()) === 'ended:killed,ended:killed,live:running', { what: 'the sweep' });
      expect(await readdir(root)).toEqual([live]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
