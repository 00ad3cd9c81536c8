import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ModelUnavailableError, OfflineModel } from '@baton/agents';
import { handleCommand, loadTask, type EventStore } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { LocalSandboxProvider } from '@baton/sandbox';
import { acquireLease, leaseOf, searchCorpus, watchCandidates } from '@baton/storage';
import { ConsumerStoppingError } from '@baton/bus';
import { dispatchedTask, pgTest as test } from '@baton/testing';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { handBackPredecessors } from './predecessors.ts';
import { runSubagentJob, type RunnerDeps } from './subagent.ts';
import { artifactStore } from './wiring.ts';

const log = silentLogger();
let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-lease-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const deps = (store: EventStore, runnerId: string, ttlMs = 30_000): RunnerDeps => {
  const { pool } = store;
  return { store, model: new OfflineModel(), sandboxes: new LocalSandboxProvider({ root, pool }), artifacts: artifactStore(pool), search: (q, n) => searchCorpus(pool, 'docs', q, n), runnerId, now: () => new Date(), log, lease: { db: pool, ttlMs } };
};

describe('agent leases (the runner)', () => {
  test('a job delivered to a second runner while the first holds a live lease is dropped: nothing written, the holder keeps the agent', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    // Runner A claimed attempt 1 and is working (its lease is live).
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a' });
    expect(await acquireLease(pg.db.pool, { taskId: id, agentId: 'researcher-1', attempt: 1, holder: 'runner-a', ttlMs: 60_000 })).toEqual({ taken: true });
    const before = (await loadTask(pg.store, id)).events.length;
    expect(await runSubagentJob(deps(pg.store, 'runner-b'), id, 'researcher-1', () => {})).toBe('held-elsewhere');
    const after = await loadTask(pg.store, id);
    expect(after.events).toHaveLength(before);
    expect(after.state.agents['researcher-1']).toMatchObject({ status: 'running', attempt: 1 });
    expect(await leaseOf(pg.db.pool, id, 'researcher-1')).toMatchObject({ holder: 'runner-a', attempt: 1 });
  });

  test('once the holder stops renewing, the lease expires and the next delivery takes the agent over and completes it; the lease is given back', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a' });
    await acquireLease(pg.db.pool, { taskId: id, agentId: 'researcher-1', attempt: 1, holder: 'runner-a', ttlMs: 60_000 });
    // Runner A went quiet: its lease ran out.
    await pg.db.pool.query(`update agent_leases set expires_at = now() - interval '1 second' where task_id = $1`, [id]);
    expect(await runSubagentJob(deps(pg.store, 'runner-b'), id, 'researcher-1', () => {})).toBe('completed');
    const { state } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']).toMatchObject({ status: 'completed', attempt: 2 });
    expect(await leaseOf(pg.db.pool, id, 'researcher-1')).toBeNull();
  });

  test('the model API unavailable (after its client\'s retries): the attempt is handed back, not counted as lost; the lease stays a while with the error, so the watchdog leaves the job\'s own retry to it; the retry goes on', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const down = { name: 'down', complete: () => Promise.reject(new ModelUnavailableError('the Messages API could not answer: 529 overloaded')) };
    await expect(runSubagentJob({ ...deps(pg.store, 'runner-a'), model: down }, id, 'researcher-1', () => {})).rejects.toBeInstanceOf(ModelUnavailableError);
    let agent = (await loadTask(pg.store, id)).state.agents['researcher-1'];
    expect(agent).toMatchObject({ status: 'running', attempt: 1, handedBack: true, stalledAttempts: 0, modelOutage: { failures: 1, error: 'the Messages API could not answer: 529 overloaded' } });
    const since = agent!.modelOutage!.since;
    const lease = await leaseOf(pg.db.pool, id, 'researcher-1');
    expect(lease).toMatchObject({ holder: 'runner-a', lastError: 'the Messages API could not answer: 529 overloaded' });
    expect(lease!.expiresAt.getTime()).toBeGreaterThan(Date.now() + 10_000); // held for the retry, not released
    // Down again, then the job's retry on the same runner: each attempt handed back, none counted.
    await expect(runSubagentJob({ ...deps(pg.store, 'runner-a'), model: down }, id, 'researcher-1', () => {})).rejects.toBeInstanceOf(ModelUnavailableError);
    agent = (await loadTask(pg.store, id)).state.agents['researcher-1'];
    expect(agent).toMatchObject({ attempt: 2, handedBack: true, stalledAttempts: 0, modelOutage: { since, failures: 2 } });
    expect(await runSubagentJob(deps(pg.store, 'runner-a'), id, 'researcher-1', () => {})).toBe('completed');
    const { state, events } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']!.modelOutage).toBeUndefined(); // its turn ended the outage
    // Each failed call is on the agent's own stream, as its turns are.
    expect(events.filter((e) => e.type === 'ModelUnavailable').map((e) => [e.streamId, e.data])).toEqual([
      [`agent-${id}-researcher-1`, { agentId: 'researcher-1', error: 'the Messages API could not answer: 529 overloaded' }],
      [`agent-${id}-researcher-1`, { agentId: 'researcher-1', error: 'the Messages API could not answer: 529 overloaded' }],
    ]);
    expect(events.filter((e) => e.type === 'SubagentHandedBack').map((e) => e.data)).toEqual([
      { agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a', reason: 'the Messages API could not answer: 529 overloaded' },
      { agentId: 'researcher-1', attempt: 2, runnerId: 'runner-a', reason: 'the Messages API could not answer: 529 overloaded' },
    ]);
  });

  test("a model outage that lasts the model's limit fails the agent model_unavailable, whichever runner asks last: it is counted from the first failed call the log recorded", async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const down = { name: 'down', outageLimitMs: 60_000, complete: () => Promise.reject(new ModelUnavailableError('the Messages API could not answer: 503 service unavailable')) };
    await expect(runSubagentJob({ ...deps(pg.store, 'runner-a'), model: down }, id, 'researcher-1', () => {})).rejects.toBeInstanceOf(ModelUnavailableError);
    // Runner A went away; runner B takes the agent over a minute and a second later and finds the model still down.
    await pg.db.pool.query(`update agent_leases set expires_at = now() - interval '1 second' where task_id = $1`, [id]);
    const later = () => new Date(Date.now() + 61_000);
    await runSubagentJob({ ...deps(pg.store, 'runner-b'), model: down, now: later }, id, 'researcher-1', () => {});
    const { state } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']).toMatchObject({
      status: 'failed',
      attempt: 2,
      error: { code: 'model_unavailable', message: expect.stringMatching(/^agent researcher-1's model could not answer for 6\d s \(2 failed calls since \d{4}-\S+; ANTHROPIC_OUTAGE_LIMIT_MS is 60000 ms\): given up\. Last error: the Messages API could not answer: 503 service unavailable$/) },
    });
    // Its lead is told, as of any failed agent.
    expect(state.lead!.openToolUses[0]).toMatchObject({ state: 'resolved', result: { isError: true, content: expect.stringMatching(/^subagent researcher-1 failed \(model_unavailable\)/) } });
    expect(await leaseOf(pg.db.pool, id, 'researcher-1')).toBeNull();
  });

  test('the lease is renewed while the job runs (a slow model) and another runner cannot take it meanwhile', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const model = new OfflineModel();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const slow: RunnerDeps = { ...deps(pg.store, 'runner-a', 600), model: { name: 'slow', complete: async (r) => { entered(); await gate; return model.complete(r); } } };
    const job = runSubagentJob(slow, id, 'researcher-1', () => {});
    await inside;
    const first = await leaseOf(pg.db.pool, id, 'researcher-1');
    expect(first).toMatchObject({ holder: 'runner-a', attempt: 1 });
    // Wait (for a condition, not a time) until the lease has been renewed past its first expiry.
    for (;;) {
      const l = await leaseOf(pg.db.pool, id, 'researcher-1');
      if (l && first && l.expiresAt > first.expiresAt) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await runSubagentJob(deps(pg.store, 'runner-b'), id, 'researcher-1', () => {})).toBe('held-elsewhere');
    release();
    expect(await job).toBe('completed');
    expect(await leaseOf(pg.db.pool, id, 'researcher-1')).toBeNull();
  });
});

describe('a stopping runner hands its attempt back', () => {
  /** A model call that lasts until the job's signal aborts (a long call a deployment interrupts); `entered` once it is made. */
  const endless = (entered: () => void): RunnerDeps['model'] => ({
    name: 'endless',
    complete: (r) =>
      new Promise((_, reject) => {
        r.signal?.addEventListener('abort', () => reject(r.signal?.reason as Error), { once: true });
        entered();
      }),
  });
  /** One job, aborted with `reason` while it is in its model call (its attempt claimed). */
  const abortedRun = async (store: EventStore, id: string, reason: Error): Promise<void> => {
    const ctl = new AbortController();
    let inCall!: () => void;
    const called = new Promise<void>((r) => (inCall = r));
    const job = runSubagentJob({ ...deps(store, 'runner-a'), model: endless(inCall) }, id, 'researcher-1', () => {}, { signal: ctl.signal });
    await Promise.race([called, job]);
    ctl.abort(reason);
    await expect(job).rejects.toThrow();
  };

  test('an attempt aborted because its runner stops is recorded as handed back and not counted as lost; one aborted for another reason is', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const agent = async () => (await loadTask(pg.store, id)).state.agents['researcher-1'];
    // Six graceful stops in a row, each during the same long model call: more than WATCHDOG_MAX_STALLED_ATTEMPTS (5).
    for (let n = 1; n <= 6; n++) {
      await abortedRun(pg.store, id, new ConsumerStoppingError());
      expect(await agent()).toMatchObject({ status: 'running', attempt: n, stalledAttempts: 0 });
    }
    const { events } = await loadTask(pg.store, id);
    expect(events.filter((e) => e.type === 'SubagentHandedBack').map((e) => e.data)).toEqual(
      [1, 2, 3, 4, 5, 6].map((attempt) => ({ agentId: 'researcher-1', attempt, runnerId: 'runner-a', reason: 'its runner stopped (a graceful shutdown)' })),
    );
    // Its time running out is not a hand-back: that attempt counts.
    await abortedRun(pg.store, id, new Error('handler ran past 100 ms'));
    expect(await agent()).toMatchObject({ status: 'running', attempt: 7, stalledAttempts: 1 });
    // And the agent goes on to complete.
    expect(await runSubagentJob(deps(pg.store, 'runner-b'), id, 'researcher-1', () => {})).toBe('completed');
  });

  test('a job that starts once its runner is stopping claims nothing: no attempt, no lease, no hand-back', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const before = (await loadTask(pg.store, id)).events.length;
    // Stopping has begun (its grace period running): `stopping` is aborted, the handler's `signal` not yet.
    const stopping = new AbortController();
    stopping.abort(new ConsumerStoppingError());
    await expect(runSubagentJob({ ...deps(pg.store, 'runner-a'), model: endless(() => {}) }, id, 'researcher-1', () => {}, { signal: new AbortController().signal, stopping: stopping.signal })).rejects.toBeInstanceOf(ConsumerStoppingError);
    const after = await loadTask(pg.store, id);
    expect(after.events).toHaveLength(before);
    expect(after.state.agents['researcher-1']).toMatchObject({ status: 'dispatched', attempt: 0 });
    expect(await leaseOf(pg.db.pool, id, 'researcher-1')).toBeNull();
  });
});

describe("a restarted runner hands back its predecessor's agents", () => {
  test("the live leases of an earlier process of this runner expire at once, with why; others' are left alone", async ({ pg }) => {
    const [a, b] = [await dispatchedTask(pg.store), await dispatchedTask(pg.store)];
    const take = (taskId: string, holder: string) => acquireLease(pg.db.pool, { taskId, agentId: 'researcher-1', attempt: 1, holder, ttlMs: 600_000 });
    await take(a, 'node-7-100'); // the process that died
    await take(b, 'node-7-200'); // another runner on this host, alive
    const self = { runnerId: 'node-7-300', explicit: false, host: 'node-7' };
    expect(await handBackPredecessors(pg.db.pool, self, log, (pid) => pid === 200)).toBe(1);
    const lost = await leaseOf(pg.db.pool, a, 'researcher-1');
    expect(lost).toMatchObject({ holder: 'node-7-100', lastError: 'runner node-7-100 stopped while running this agent (node-7-300 started in its place)' });
    expect(lost!.expiresAt.getTime()).toBeLessThanOrEqual(Date.now());
    // The watchdog now sees it (an expired lease), without waiting for the grace period.
    expect(await watchCandidates(pg.db.pool, 600_000)).toEqual([{ id: a, leaseLostAt: lost!.expiresAt }]);
    expect((await leaseOf(pg.db.pool, b, 'researcher-1'))!.expiresAt.getTime()).toBeGreaterThan(Date.now());
    // Nothing left to hand back the second time.
    expect(await handBackPredecessors(pg.db.pool, self, log, (pid) => pid === 200)).toBe(0);
    // The next runner to take the lease keeps that error on it: the watchdog names it if this attempt is lost too.
    expect(await take(a, 'node-7-300')).toEqual({ taken: true });
    expect(await leaseOf(pg.db.pool, a, 'researcher-1')).toMatchObject({ holder: 'node-7-300', lastError: 'runner node-7-100 stopped while running this agent (node-7-300 started in its place)' });
  });
});
