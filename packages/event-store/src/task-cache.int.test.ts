import { randomUUID } from 'node:crypto';
import { agentStreamId, taskStreamId, type NewEvent } from '@baton/domain';
import { toTaskView } from '@baton/api';
import { pgTest as test, testClient, waitFor } from '@baton/testing';
import type pg from 'pg';
import { describe, expect } from 'vitest';
import { gatewayCachePolicy, keepUnfinished, servicesCachePolicy, TaskCache } from './task-cache.ts';
import { loadTask } from './tasks.ts';

const submitted = (): NewEvent => ({
  id: randomUUID(),
  type: 'TaskSubmitted',
  data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null },
});
const turn = (agentId: string, n: number): NewEvent => ({
  id: randomUUID(),
  type: 'ModelTurnRecorded',
  data: { agentId, turn: n, model: 'm', content: [{ type: 'text', text: `t${n}` }], stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0 },
});

describe('TaskCache', () => {
  test('with keepUnfinished, a task waiting for a person stays cached (its answer is all the next load reads); a finished one holds no memory', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { keep: keepUnfinished });
    const taskId = randomUUID();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted(), { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }] });
    expect((await cache.load(taskId)).state.status).toBe('running');
    expect(cache.size).toBe(1);
    await store.append({
      streamId: taskStreamId(taskId), taskId, expectedVersion: 2,
      events: [
        { id: randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'a', name: 'ask_user', input: {} }], stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0 } },
        { id: randomUUID(), type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'lead', toolUseId: 'a', questions: ['q'], context: '' } },
      ],
    });
    const parked = await cache.load(taskId);
    expect(parked.state.status).toBe('awaiting_input');
    expect(parked.events).toHaveLength(4);
    expect(cache.size).toBe(1); // (how many of its events are absorbed depends on other transactions open meanwhile)
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 4, events: [{ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } }] });
    const hits = cache.hits;
    const failed = await cache.load(taskId);
    expect(cache.hits).toBe(hits + 1); // read from the cached parked state: only the new event
    expect(failed.state.status).toBe('failed');
    expect(toTaskView(failed.state)).toEqual(toTaskView((await loadTask(store, taskId)).state));
    expect([cache.size, cache.eventCount]).toEqual([0, 0]);
  });

  test('ended: a task this process heard has ended is dropped and remembered as finished (its old first event does not start it again)', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { keep: keepUnfinished });
    const taskId = randomUUID();
    const first = submitted();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [first] });
    expect((await cache.load(taskId)).state.status).toBe('pending');
    expect(cache.size).toBe(1);
    cache.ended(taskId);
    expect([cache.size, cache.eventCount]).toEqual([0, 0]);
    const [recorded] = await store.readStream(taskStreamId(taskId));
    expect(cache.advance(taskId, recorded!)).toBeNull();
    cache.ended(taskId); // twice, or for a task never cached: nothing to drop
    cache.ended(randomUUID());
    expect(cache.size).toBe(0);
  });

  test('loads incrementally and always equals a full re-read', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool);
    const taskId = randomUUID();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
    expect((await cache.load(taskId)).state.version).toBe(1);
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: [{ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }] });
    const second = await cache.load(taskId);
    const full = await loadTask(store, taskId);
    expect(toTaskView(second.state)).toEqual(toTaskView(full.state));
    expect(second.events.map((e) => e.id)).toEqual(full.events.map((e) => e.id));
    expect(cache.hits).toBe(1);
    expect(cache.misses).toBe(1);
  });

  test('an event that commits late with a lower position is not skipped', async ({ pg: { url, db, store } }) => {
    const cache = new TaskCache(db.pool);
    const taskId = randomUUID();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
    // An agent-stream append takes a position, but its transaction stays open…
    const slow = testClient(url);
    await slow.connect();
    await slow.query('begin');
    const late = turn('researcher-1', 1);
    await slow.query(`insert into events (stream_id, stream_version, task_id, event_id, type, data) values ($1, 1, $2, $3, 'ModelTurnRecorded', $4)`, [agentStreamId(taskId, 'researcher-1'), taskId, late.id, JSON.stringify(late.data)]);
    // …while a later task-stream event commits and the cache loads past it.
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: [{ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } }] });
    expect((await cache.load(taskId)).events).toHaveLength(2);
    await slow.query('commit');
    await slow.end();
    const after = await cache.load(taskId);
    expect(after.events.map((e) => e.id)).toContain(late.id);
    expect(after.events).toHaveLength(3);
  });

  test('tasks waiting for a person hold at most their own budget: however many wait (a watchdog pass loads them all), a task at work stays cached', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { ...servicesCachePolicy, maxEvents: 10, maxWaitingEvents: 4 });
    const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
    const running = randomUUID();
    await store.append({ streamId: taskStreamId(running), taskId: running, expectedVersion: 0, events: [submitted(), started()] });
    expect((await cache.load(running)).state.status).toBe('running');
    for (let i = 0; i < 5; i++) {
      const id = randomUUID();
      await store.append({
        streamId: taskStreamId(id), taskId: id, expectedVersion: 0,
        events: [submitted(), started(), turn('lead', 1), { id: randomUUID(), type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'lead', toolUseId: 'a', questions: ['q'], context: '' } }],
      });
      expect((await cache.load(id)).state.status).toBe('awaiting_input');
      expect(cache.eventCount).toBeLessThanOrEqual(2 + 4);
    }
    const hits = cache.hits;
    await cache.load(running);
    expect(cache.hits).toBe(hits + 1); // still cached: the waiting tasks went instead
  });

  test("the gateway's policy keeps finished tasks (read again and again: the report, the page), within the idle share — a task at work stays", async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { ...gatewayCachePolicy, maxTasks: 4, maxWaitingTasks: 2 });
    const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
    const cancelled = (): NewEvent => ({ id: randomUUID(), type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } });
    const running = randomUUID();
    await store.append({ streamId: taskStreamId(running), taskId: running, expectedVersion: 0, events: [submitted(), started()] });
    await cache.load(running);
    const done = randomUUID();
    await store.append({ streamId: taskStreamId(done), taskId: done, expectedVersion: 0, events: [submitted(), started(), cancelled()] });
    expect((await cache.load(done)).state.status).toBe('cancelled');
    const hits = cache.hits;
    expect((await cache.load(done)).events).toHaveLength(3);
    expect(cache.hits).toBe(hits + 1); // kept: the services' policy drops it
    for (let i = 0; i < 5; i++) {
      const id = randomUUID();
      await store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [submitted(), started(), cancelled()] });
      await cache.load(id);
      expect(cache.size).toBeLessThanOrEqual(1 + 2);
    }
    const before = cache.hits;
    await cache.load(running);
    expect(cache.hits).toBe(before + 1); // the finished ones went instead
  });

  test('waiting tasks also have a share of the task count: with many small ones, a task at work stays', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { ...servicesCachePolicy, maxTasks: 4, maxWaitingTasks: 2 });
    const running = randomUUID();
    await store.append({ streamId: taskStreamId(running), taskId: running, expectedVersion: 0, events: [submitted(), { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }] });
    await cache.load(running);
    for (let i = 0; i < 6; i++) {
      const id = randomUUID();
      await store.append({
        streamId: taskStreamId(id), taskId: id, expectedVersion: 0,
        events: [submitted(), { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }, turn('lead', 1), { id: randomUUID(), type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'lead', toolUseId: 'a', questions: ['q'], context: '' } }],
      });
      await cache.load(id);
      expect(cache.size).toBeLessThanOrEqual(1 + 2);
    }
    const hits = cache.hits;
    await cache.load(running);
    expect(cache.hits).toBe(hits + 1);
  });

  test('stays within its byte budget: a few tasks with long model turns push out the least recently used; one larger than the whole budget stays only until another is loaded', async ({ pg: { db, store } }) => {
    const long = (agentId: string, n: number): NewEvent => {
      const e = turn(agentId, n) as NewEvent & { data: { content: { type: 'text'; text: string }[] } };
      return { ...e, data: { ...e.data, content: [{ type: 'text', text: 'x'.repeat(9_000) }] } } as NewEvent;
    };
    const task = async (turns: number): Promise<string> => {
      const id = randomUUID();
      await store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [submitted(), ...Array.from({ length: turns }, (_, i) => long('lead', i + 1))] });
      return id;
    };
    // The budget counts each cached task as last known (absorbed or not), so one load is enough;
    // the wait loads again only if something else got in the way.
    const loadUntilCached = (cache: TaskCache, id: string, size: number, events: number) => waitFor(async () => (await cache.load(id), cache.size === size && cache.eventCount === events), { what: `task ${id} in the cache` });
    // What one task of a turn weighs, measured: the budget holds three and a half.
    const probe = new TaskCache(db.pool);
    await loadUntilCached(probe, await task(1), 1, 2);
    const one = probe.byteCount;
    expect(one).toBeGreaterThan(9_000);
    const cache = new TaskCache(db.pool, { maxBytes: Math.floor(one * 3.5) });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(await task(1));
      const held = Math.min(i + 1, 3);
      await loadUntilCached(cache, ids[i] as string, held, 2 * held);
      expect(cache.byteCount).toBe(held * one);
    }
    const misses = cache.misses;
    await cache.load(ids[0] as string); // the least recently used went
    expect(cache.misses).toBe(misses + 1);
    // A task of four long turns is over the whole budget: it stays alone (the others went), and goes
    // as soon as another task is loaded.
    const big = await task(4);
    await loadUntilCached(cache, big, 1, 5);
    expect((await cache.load(big)).state).toEqual((await loadTask(store, big)).state);
    await loadUntilCached(cache, ids[3] as string, 1, 2);
    expect(cache.byteCount).toBe(one);
  });

  test('stays within its event budget (least recently used tasks are dropped)', async ({ pg: { db, store } }) => {
    const cache = new TaskCache(db.pool, { maxEvents: 2, maxTasks: 2 });
    const ids = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of ids) {
      await store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [submitted(), { id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } }] });
      await cache.load(id);
      expect(cache.size).toBeLessThanOrEqual(2);
      expect(cache.eventCount).toBeLessThanOrEqual(2);
    }
    expect((await cache.load(ids[0] as string)).state.status).toBe('failed');
  });

  describe('what a process knows without reading (advance, note)', () => {
    /** A pool that counts the statements the cache sends. */
    const counting = (pool: pg.Pool) => {
      const c = { n: 0, query: ((...args: unknown[]) => ((c.n += 1), (pool.query as (...a: unknown[]) => unknown)(...args))) as pg.Pool['query'] };
      return c;
    };
    const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
    const failed = (): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } });
    /** The event as it was recorded (what its bus message carries). */
    const recorded = async (store: Parameters<typeof loadTask>[0], taskId: string, id: string) => (await loadTask(store, taskId)).events.find((e) => e.id === id)!;

    test('the next event of the task stream is applied without a read, and equals a read; anything else is not applied', async ({ pg: { db, store } }) => {
      const pool = counting(db.pool);
      const cache = new TaskCache(pool);
      const taskId = randomUUID();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
      await cache.load(taskId);
      const next = started();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: [next] });
      const woken = await recorded(store, taskId, next.id);
      const statements = pool.n;
      const applied = cache.advance(taskId, woken);
      expect(pool.n).toBe(statements);
      expect(cache.advanced).toBe(1);
      const read = await loadTask(store, taskId);
      expect(toTaskView(applied!.state)).toEqual(toTaskView(read.state));
      expect(applied!.events.map((e) => e.id)).toEqual(read.events.map((e) => e.id));
      // Known already, or more than one event ahead, or not of the task stream: load instead.
      expect(cache.advance(taskId, woken)).toBeNull();
      const later = [turn('lead', 1), failed()];
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 2, events: later });
      expect(cache.advance(taskId, await recorded(store, taskId, later[1]!.id))).toBeNull();
      expect(cache.advance(randomUUID(), woken)).toBeNull();
      expect(cache.advanced).toBe(1);
      // A load after wake-ups applied still reads everything past what was read before.
      expect((await cache.load(taskId)).events.map((e) => e.id)).toEqual((await loadTask(store, taskId)).events.map((e) => e.id));
    });

    test('while a subagent is at work nothing is applied: its steps, in its own stream, could be missing', async ({ pg: { db, store } }) => {
      const cache = new TaskCache(db.pool);
      const taskId = randomUUID();
      await store.append({
        streamId: taskStreamId(taskId), taskId, expectedVersion: 0,
        events: [submitted(), started(), { id: randomUUID(), type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'u', prompt: 'p' } }],
      });
      expect(Object.keys((await cache.load(taskId)).state.agents)).toEqual(['researcher-1']);
      // The subagent writes a step in its stream: this process has not seen it.
      await store.append({ streamId: agentStreamId(taskId, 'researcher-1'), taskId, expectedVersion: 0, events: [turn('researcher-1', 1)] });
      const next = failed();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 3, events: [next] });
      expect(cache.advance(taskId, await recorded(store, taskId, next.id))).toBeNull();
    });

    test("a task's first event starts what is known of it: its next load still reads the whole task", async ({ pg: { db, store } }) => {
      const cache = new TaskCache(db.pool);
      const taskId = randomUUID();
      const first = submitted();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [first] });
      const applied = cache.advance(taskId, await recorded(store, taskId, first.id));
      expect(applied?.state.status).toBe('pending');
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: [started()] });
      await store.append({ streamId: agentStreamId(taskId, 'researcher-1'), taskId, expectedVersion: 0, events: [turn('researcher-1', 1)] });
      const loaded = await cache.load(taskId);
      expect(cache.hits).toBe(1);
      expect(loaded.events.map((e) => e.id)).toEqual((await loadTask(store, taskId)).events.map((e) => e.id));
    });

    test("not from a first event that is a fork's (its history is written whole) or a finished task's that was dropped (an old message replayed)", async ({ pg: { db, store } }) => {
      const cache = new TaskCache(db.pool, servicesCachePolicy);
      const fork = randomUUID();
      const forked: NewEvent = { ...submitted(), data: { ...(submitted().data as object), forkedFrom: { taskId: randomUUID(), atVersion: 3 } } } as NewEvent;
      await store.append({ streamId: taskStreamId(fork), taskId: fork, expectedVersion: 0, events: [forked, started()] });
      expect(cache.advance(fork, await recorded(store, fork, forked.id))).toBeNull();

      const done = randomUUID();
      const first = submitted();
      await store.append({ streamId: taskStreamId(done), taskId: done, expectedVersion: 0, events: [first, started(), failed()] });
      expect((await cache.load(done)).state.status).toBe('failed');
      expect(cache.size).toBe(0);
      expect(cache.advance(done, await recorded(store, done, first.id))).toBeNull();
      expect(cache.advanced).toBe(0);
    });

    test('what the process wrote, noted, is what the next wake-up applies to; an older view is not kept', async ({ pg: { db, store } }) => {
      const cache = new TaskCache(db.pool, servicesCachePolicy);
      const taskId = randomUUID();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
      const loaded = await cache.load(taskId);
      // The process appends two events (as the lead does) and notes the task as it then stands.
      const own = [started(), turn('lead', 1)];
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: own });
      const written = await loadTask(store, taskId);
      cache.note(taskId, { state: written.state, events: [...loaded.events, ...written.events.slice(1)] });
      expect(cache.eventCount).toBe(3);
      // An older view (what was loaded first) changes nothing; nor does a state that is not the fold of its events.
      cache.note(taskId, loaded);
      cache.note(taskId, { state: { ...written.state, version: 4 }, events: [...loaded.events, ...written.events.slice(1), written.events[2]!] });
      expect(cache.eventCount).toBe(3);
      const next = failed();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 3, events: [next] });
      const done = cache.advance(taskId, await recorded(store, taskId, next.id));
      expect(toTaskView(done!.state)).toEqual(toTaskView((await loadTask(store, taskId)).state));
      // Finished: the services' policy keeps nothing of it.
      expect([cache.size, cache.eventCount]).toEqual([0, 0]);
    });
  });
});

