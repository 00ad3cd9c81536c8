import { randomUUID } from 'node:crypto';
import { OfflineModel, type ModelClient } from '@baton/agents';
import { busNames, ensureTopology } from '@baton/bus';
import { handleCommand, loadTask } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { acquireLease, expireLeasesOf, leaseOf } from '@baton/storage';
import { dispatchedTask, stackTest, waitFor } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect } from 'vitest';
import { startOrchestrator, type OrchestratorDeps } from './worker.ts';

const log = silentLogger();

import type { NatsFixture, PgFixture } from '@baton/testing';
type Fixture = { pg: PgFixture; nats: NatsFixture };

async function orchestrator(f: Fixture, o: { model?: ModelClient; graceMs?: number; maxRedispatches?: number; maxAttempts?: number } = {}) {
  const names = busNames(f.nats.namespace);
  await ensureTopology(await jetstreamManager(f.nats.nc), names);
  const deps: OrchestratorDeps = {
    store: f.pg.store, model: o.model ?? new OfflineModel(), now: () => new Date(), log,
    pool: f.pg.db.pool, nc: f.nats.nc, js: jetstream(f.nats.nc), names, concurrency: 4, maxAttempts: o.maxAttempts ?? 5,
    relay: { enabled: true, batchSize: 100, backstopMs: 30_000 },
    watchdog: { everyMs: 100, graceMs: o.graceMs ?? 300, maxRedispatches: o.maxRedispatches ?? 2 },
    busCheckMs: 100,
  };
  return { names, orch: await startOrchestrator(deps) };
}

/** Run jobs messages for one agent: count them, ack them (a "runner" that takes the job and dies before claiming it). */
async function jobsFor(f: Fixture, names: ReturnType<typeof busNames>, agentId: string): Promise<number> {
  const jsm = await jetstreamManager(f.nats.nc);
  const info = await jsm.streams.info(names.jobsStream).catch(() => null);
  if (!info) return 0;
  let n = 0;
  const subjects = await jsm.streams.info(names.jobsStream, { subjects_filter: '>' });
  for (const [subject, count] of Object.entries(subjects.state.subjects ?? {})) if (subject.endsWith(`.${agentId}`)) n += count;
  return n;
}

describe('the watchdog', () => {
  stackTest('a dispatched agent whose job is lost is re-dispatched; when no runner ever claims it (and no job waits in the queue) it fails agent_lost and the lead goes on', async ({ pg, nats }) => {
    const f = { pg, nats };
    const id = await dispatchedTask(f.pg.store);
    const { names, orch } = await orchestrator(f);
    try {
      // No runner here: the dispatch's job waits in the queue, and look after look adds none beside it
      // (each look had queued one more per stuck agent), nor counts a re-dispatch.
      // (The first look may come before the relay published the dispatch's job, and add one.)
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) >= 1, { timeoutMs: 15_000, what: "the dispatch's job in the queue" });
      const settled = orch.watchdog.visits + 1;
      await waitFor(() => orch.watchdog.visits >= settled, { timeoutMs: 15_000, what: 'another look at the task' });
      const queued = await jobsFor(f, names, 'researcher-1');
      expect(queued).toBeLessThanOrEqual(2);
      await waitFor(() => orch.watchdog.visits >= settled + 3, { timeoutMs: 15_000, what: 'three more looks at the task' });
      expect(await jobsFor(f, names, 'researcher-1')).toBe(queued);
      expect((await leaseOf(f.pg.db.pool, id, 'researcher-1'))?.fires ?? 0).toBe(0);
      // A "runner" that takes every job and dies before it claims anything (it acks: no job waits in the queue).
      const sink = await (await jetstream(f.nats.nc).consumers.get(names.jobsStream, names.consumers.runner)).consume();
      void (async () => {
        for await (const m of sink) m.ack();
      })();
      await waitFor(async () => (await loadTask(f.pg.store, id)).state.agents['researcher-1']?.status === 'failed', { timeoutMs: 20_000, what: 'the agent to fail' });
      sink.stop();
      const { state } = await loadTask(f.pg.store, id);
      expect(state.agents['researcher-1']?.error).toMatchObject({ code: 'agent_lost', message: expect.stringMatching(/re-dispatched 2 times/) });
      // The lead took the failure as its tool result and went on with its next turn.
      await waitFor(async () => ((await loadTask(f.pg.store, id)).state.lead?.turns ?? 0) >= 2, { timeoutMs: 15_000, what: 'the lead to go on' });
      expect(orch.watchdog.failed).toBe(1);
      expect(await leaseOf(f.pg.db.pool, id, 'researcher-1')).toBeNull();
    } finally {
      await orch.stop();
    }
  });

  stackTest("a runner's lease that runs out (or is handed back) is acted on at the next look, even when the task was looked at within the grace period", async ({ pg, nats }) => {
    const f = { pg, nats };
    const id = await dispatchedTask(f.pg.store);
    await handleCommand(f.pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-x' });
    await acquireLease(f.pg.db.pool, { taskId: id, agentId: 'researcher-1', attempt: 1, holder: 'runner-x', ttlMs: 600_000 });
    // No transition for a while (a long tool run): the watchdog looks at the task, finds its runner at work, leaves it.
    await f.pg.db.pool.query(`update tasks set watch_since = now() - interval '1 hour' where id = $1`, [id]);
    const { names, orch } = await orchestrator(f, { graceMs: 120_000 });
    try {
      await waitFor(() => orch.watchdog.visits >= 1, { what: 'the watchdog to look at the task' });
      // The dispatch's own job (the relay's, on its own schedule) is on the bus before we count.
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) >= 1, { timeoutMs: 15_000, what: "the dispatch's job" });
      expect(orch.watchdog.redispatched).toBe(0);
      // Runner x had taken the job (acknowledged: it leaves the queue).
      const taken = await (await jetstream(f.nats.nc).consumers.get(names.jobsStream, names.consumers.runner)).fetch({ max_messages: 10, expires: 2000 });
      for await (const m of taken) m.ack();
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) === 0, { what: 'the job taken' });
      const jobsBefore = 0;
      // Runner x dies; its restart hands the agent back: the watchdog re-dispatches it now, not a grace period (two minutes) later.
      expect(await expireLeasesOf(f.pg.db.pool, ['runner-x'], 'runner runner-x stopped')).toHaveLength(1);
      await waitFor(() => orch.watchdog.redispatched >= 1, { timeoutMs: 15_000, what: 'the watchdog to re-dispatch the agent' });
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) > jobsBefore, { timeoutMs: 15_000, what: 'the re-dispatched job on the bus' });
      expect(orch.watchdog.redispatched).toBe(1);
    } finally {
      await orch.stop();
    }
  });

  stackTest('a re-dispatched job continues the task\'s trace: it carries the traceparent of the event it comes from', async ({ pg, nats }) => {
    const f = { pg, nats };
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const id = await dispatchedTask(f.pg.store, 'researcher', 'Research the topic', { metadata: { traceparent } });
    const { names, orch } = await orchestrator(f);
    try {
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) >= 2, { timeoutMs: 15_000, what: 'the watchdog to re-dispatch the agent' });
      const jsm = await jetstreamManager(f.nats.nc);
      const subject = names.jobSubject('run', id, 'researcher-1');
      const info = await jsm.streams.info(names.jobsStream);
      const sent: { id: string; traceparent: string | undefined }[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
        const m = await jsm.streams.getMessage(names.jobsStream, { seq }).catch(() => null);
        if (m?.subject === subject) sent.push({ id: m.header.get('Nats-Msg-Id'), traceparent: m.header.get('traceparent') || undefined });
      }
      const redispatches = sent.filter((m) => !m.id.startsWith('job-')); // the heal's or the watchdog's, beside the dispatch's own
      expect(redispatches.length, JSON.stringify(sent)).toBeGreaterThanOrEqual(1);
      for (const m of redispatches) expect(m.traceparent).toBe(traceparent);
    } finally {
      await orch.stop();
    }
  });

  stackTest('the bus loses its streams: they are re-created and the unfinished task gets its job again, from the log', async ({ pg, nats }) => {
    const f = { pg, nats };
    const id = await dispatchedTask(f.pg.store);
    const { names, orch } = await orchestrator(f, { graceMs: 600_000 }); // only the heal may re-send it
    try {
      await waitFor(async () => (await jobsFor(f, names, 'researcher-1')) >= 1, { timeoutMs: 10_000, what: 'the dispatch job' });
      await waitFor(async () => (await f.pg.db.pool.query('select count(*)::int as n from bus_streams')).rows[0].n === 2, { what: 'the streams to be recorded' });
      const jsm = await jetstreamManager(f.nats.nc);
      await jsm.streams.delete(names.jobsStream);
      await jsm.streams.delete(names.eventsStream);
      await waitFor(async () => orch.watchdog.heals >= 1 && (await jobsFor(f, names, 'researcher-1')) >= 1, { timeoutMs: 15_000, what: 'the heal to re-send the job into the new stream' });
      // The orchestrator's consumer was re-created too and works: a new task's trigger is handled.
      const t2 = randomUUID();
      await handleCommand(f.pg.store, t2, { type: 'SubmitTask', prompt: 'bench', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
      await waitFor(async () => (await loadTask(f.pg.store, t2)).state.status === 'completed', { timeoutMs: 20_000, what: 'a new task to complete after the loss' });
    } finally {
      await orch.stop();
    }
    expect((await loadTask(f.pg.store, id)).state.agents['researcher-1']?.status).toBe('dispatched');
  });

  stackTest('a lead whose trigger dead-letters (the model keeps failing) ends the task failed with the reason', async ({ pg, nats }) => {
    const f = { pg, nats };
    const broken: ModelClient = { name: 'broken', complete: async () => { throw new Error('model endpoint is down'); } };
    const { orch } = await orchestrator(f, { model: broken, maxAttempts: 2 });
    try {
      const id = randomUUID();
      await handleCommand(f.pg.store, id, { type: 'SubmitTask', prompt: 'bench', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
      await waitFor(async () => (await loadTask(f.pg.store, id)).state.status === 'failed', { timeoutMs: 20_000, what: 'the task to fail' });
      expect((await loadTask(f.pg.store, id)).state.error).toMatchObject({ code: 'lead_failed', message: expect.stringMatching(/model endpoint is down/) });
    } finally {
      await orch.stop();
    }
  });
});
