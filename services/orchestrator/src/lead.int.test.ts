import { randomUUID } from 'node:crypto';
import { OfflineModel } from '@baton/agents';
import { busNames, ensureTopology } from '@baton/bus';
import { handleCommand, loadTask, TaskCache, type EventStore } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { pgTest, stackTest, waitFor } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect } from 'vitest';
import { advanceTask, type LeadDeps } from './lead.ts';
import { startOrchestrator } from './worker.ts';

const log = silentLogger();
const deps = (store: EventStore): LeadDeps => ({ store, model: new OfflineModel(), now: () => new Date(), log });

async function submit(store: EventStore, opts: { team?: string; requirePlanApproval?: boolean } = {}): Promise<string> {
  const id = randomUUID();
  await handleCommand(store, id, {
    type: 'SubmitTask', prompt: 'Research the history of event sourcing', team: opts.team ?? 'research', requirePlanApproval: opts.requirePlanApproval ?? true,
    approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null,
  });
  return id;
}

describe('advanceTask (the lead loop)', () => {
  pgTest('bench team: 10 model turns, each one durable append, then completed', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'bench' });
    await advanceTask(deps(pg.store), id);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('completed');
    expect(events.filter((e) => e.type === 'ModelTurnRecorded')).toHaveLength(10);
    expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
    // One transaction per step: TaskStarted + turn 1 + its tool result, …, turn 10 + TaskCompleted.
    const txids = await pg.db.pool.query(`select count(distinct transaction_id)::int as n from events where task_id = $1`, [id]);
    expect(txids.rows[0].n).toBe(11); // submit + 10 steps
    const turn4 = events.find((e) => e.type === 'ModelTurnRecorded' && e.data.turn === 4);
    expect(turn4?.metadata.startedAt).toMatch(/^\d{4}-/);
  });

  pgTest('running it concurrently five times records each step exactly once (with and without the cache)', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'bench' });
    const cache = new TaskCache(pg.db.pool);
    await Promise.all(Array.from({ length: 5 }, (_, i) => advanceTask(i % 2 ? { ...deps(pg.store), load: cache.load } : deps(pg.store), id)));
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('completed');
    expect(events.filter((e) => e.type === 'ModelTurnRecorded').map((e) => (e.data as { turn: number }).turn)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(events.filter((e) => e.type === 'TaskCompleted')).toHaveLength(1);
  });

  pgTest('plan approval: the lead stops at awaiting_input holding nothing; approve → dispatch; reject → the lead sees why', async ({ pg }) => {
    const id = await submit(pg.store);
    await advanceTask(deps(pg.store), id);
    let { state } = await loadTask(pg.store, id);
    expect(state.status).toBe('awaiting_input');
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'approval', toolName: 'Task', input: { agent: 'researcher' } });
    expect((req as { plan: string }).plan).toMatch(/Plan for/);
    await advanceTask(deps(pg.store), id); // nothing to do while waiting
    expect((await loadTask(pg.store, id)).state.version).toBe(state.version);

    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: req!.requestId, decision: 'approve', input: { agent: 'researcher', prompt: 'edited prompt' }, decidedBy: 'u' });
    await advanceTask(deps(pg.store), id);
    ({ state } = await loadTask(pg.store, id));
    expect(state.agents['researcher-1']).toMatchObject({ status: 'dispatched', prompt: 'edited prompt' });

    const id2 = await submit(pg.store);
    await advanceTask(deps(pg.store), id2);
    const req2 = Object.values((await loadTask(pg.store, id2)).state.pendingRequests)[0]!;
    await handleCommand(pg.store, id2, { type: 'DecideApproval', requestId: req2.requestId, decision: 'reject', reason: 'too broad', decidedBy: 'u' });
    await advanceTask(deps(pg.store), id2);
    const done = (await loadTask(pg.store, id2)).state;
    expect(done.status).toBe('completed');
    expect(done.result?.summary).toMatch(/rejected the plan: too broad/);
    expect(done.agents).toEqual({});
  });

  pgTest('an unknown team fails the task visibly', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'ghosts' });
    await advanceTask(deps(pg.store), id);
    expect((await loadTask(pg.store, id)).state).toMatchObject({ status: 'failed', error: { code: 'unknown_team' } });
  });
});

describe('startOrchestrator', () => {
  stackTest('relay + consumer drive submitted bench tasks to completion; redelivered triggers are harmless', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const orch = await startOrchestrator({
      ...deps(pg.store), load: new TaskCache(pg.db.pool).load, pool: pg.db.pool, nc: nats.nc, js: jetstream(nats.nc), names, concurrency: 8, maxAttempts: 5,
      relay: { enabled: true, batchSize: 100, backstopMs: 30_000 },
    });
    const ids = await Promise.all(Array.from({ length: 20 }, () => submit(pg.store, { team: 'bench' })));
    await waitFor(async () => {
      const r = await pg.db.pool.query(`select count(*)::int as n from tasks where status = 'completed'`);
      return r.rows[0].n === 20;
    }, { timeoutMs: 30_000, what: '20 completed tasks' });
    // Re-publish every TaskSubmitted as if JetStream redelivered it long after the dedupe window.
    const js = jetstream(nats.nc);
    for (const id of ids) await js.publish(names.triggerSubject(id, 'TaskSubmitted'), JSON.stringify({ id: randomUUID(), type: 'TaskSubmitted', taskId: id, streamId: `task-${id}`, version: 1, position: 1, recordedAt: new Date().toISOString(), data: {}, metadata: {} }));
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).consumers.info(names.eventsStream, names.consumers.orchestrator)).num_ack_pending === 0 && orch.consumer.inFlight === 0, { what: 'redeliveries handled' });
    await orch.stop();
    for (const id of ids) {
      const { events } = await loadTask(pg.store, id);
      expect(events.filter((e) => e.type === 'ModelTurnRecorded')).toHaveLength(10);
      expect(events.filter((e) => e.type === 'TaskCompleted')).toHaveLength(1);
    }
  });
});
