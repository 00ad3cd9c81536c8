import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { busNames, ensureTopology } from '@baton/bus';
import { loadTask } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { LocalSandboxProvider } from '@baton/sandbox';
import { searchCorpus } from '@baton/storage';
import { dispatchedTask, stackTest as test, waitFor } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { artifactStore } from './wiring.ts';
import { startRunner } from './worker.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-dead-jobs-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

describe('a run job dead-lettered', () => {
  test('with every delivery unsettled (handed back, never failed by its handler): recorded, and its agent is left to the watchdog, not failed', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const id = await dispatchedTask(pg.store);
    const dispatch = (await loadTask(pg.store, id)).events.find((e) => e.type === 'SubagentDispatched');
    const { pool } = pg.db;
    // A model call that never ends: the job runs past its limit, is aborted and handed back each time.
    const runner = await startRunner({
      store: pg.store, pool, js, names, log: silentLogger(), runnerId: 'runner-a', now: () => new Date(),
      model: { name: 'endless', complete: (r) => new Promise((_, reject) => r.signal?.addEventListener('abort', () => reject(r.signal?.reason as Error), { once: true })) },
      sandboxes: new LocalSandboxProvider({ root, pool }), artifacts: artifactStore(pool), search: (q, n) => searchCorpus(pool, 'docs', q, n),
      lease: { db: pool, ttlMs: 30_000 }, concurrency: 1, maxAttempts: 1, maxJobMs: 300, heartbeatMs: 100,
    });
    try {
      await js.publish(names.jobSubject('run', id, 'researcher-1'), JSON.stringify({ kind: 'run', taskId: id, agentId: 'researcher-1', causeEventId: dispatch?.id }));
      const dead = async () => (await pool.query<{ error: string }>('select error from dead_letters where consumer = $1', [names.consumers.runner])).rows;
      await waitFor(async () => (await dead()).length === 1, { what: 'the job dead-lettered' });
      expect((await dead())[0]?.error).toMatch(/without being settled/);
    } finally {
      await runner.stop();
    }
    const { state, events } = await loadTask(pg.store, id);
    expect(events.filter((e) => e.type === 'SubagentFailed')).toEqual([]);
    expect(state.agents['researcher-1']?.status).toBe('running');
  });
});
