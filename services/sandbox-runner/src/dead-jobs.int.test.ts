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
  test('unsettled (handed back each time, never failed by its handler): recorded, and its agent is left to the watchdog — until its third such dead letter, which fails it', async ({ pg, nats }) => {
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
    const dead = async () => (await pool.query<{ error: string }>('select error from dead_letters where consumer = $1 order by id', [names.consumers.runner])).rows;
    const failures = async () => (await loadTask(pg.store, id)).events.filter((e) => e.type === 'SubagentFailed');
    try {
      // The job again, as the watchdog re-dispatches it (each time a new message).
      for (let n = 1; n <= 3; n++) {
        await js.publish(names.jobSubject('run', id, 'researcher-1'), JSON.stringify({ kind: 'run', taskId: id, agentId: 'researcher-1', causeEventId: dispatch?.id }));
        await waitFor(async () => (await dead()).length === n, { what: `dead letter ${n}` });
        expect((await dead())[n - 1]?.error).toMatch(/without being settled/);
        if (n < 3) {
          expect(await failures()).toEqual([]);
          expect((await loadTask(pg.store, id)).state.agents['researcher-1']?.status).toBe('running');
        }
      }
      await waitFor(async () => (await failures()).length === 1, { what: 'the agent failed at its third dead letter' });
    } finally {
      await runner.stop();
    }
    expect((await failures())[0]?.data).toMatchObject({ agentId: 'researcher-1', code: 'job_failed', message: expect.stringMatching(/without being settled .*the agent's jobs dead-lettered 3 times: given up/) });
  });
});
