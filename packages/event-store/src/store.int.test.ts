import { randomUUID } from 'node:crypto';
import { WATCH_SINCE_LAG_S } from '@baton/db';
import { taskStreamId, type NewEvent } from '@baton/domain';
import { pgTest as test, testClient, waitFor } from '@baton/testing';
import { sql } from 'kysely';
import { describe, expect } from 'vitest';
import { ConcurrencyError } from './errors.ts';
import { appendBatch } from './append.ts';
import { NOTIFY_PAYLOAD, START, type LogCursor } from './store.ts';
import { loadTask, handleCommand, importTask } from './tasks.ts';
import { listTasks, rebuildTasksReadModel } from './read-models.ts';
import type { TaskRow } from './task-row.ts';

const submitted = (prompt = 'hello'): NewEvent => ({
  id: randomUUID(),
  type: 'TaskSubmitted',
  data: { prompt, team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null, workspace: null, budget: null },
});
const failed = (): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: 'x', message: 'y' } });

describe('EventStore.append', () => {
  test('appends, reads back in order, and reports the next version', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const s = taskStreamId(taskId);
    const r1 = await store.append({ streamId: s, taskId, expectedVersion: 0, events: [submitted()] });
    expect(r1).toMatchObject({ nextVersion: 1, duplicate: false });
    const r2 = await store.append({ streamId: s, taskId, expectedVersion: 1, events: [failed(), failed()] });
    expect(r2.nextVersion).toBe(3);
    expect(r2.positions[1]! > r2.positions[0]!).toBe(true);
    const events = await store.readStream(s);
    expect(events.map((e) => [e.version, e.type])).toEqual([[1, 'TaskSubmitted'], [2, 'TaskFailed'], [3, 'TaskFailed']]);
    expect(await store.readTask(taskId)).toHaveLength(3);
  });

  test('data and metadata come back as appended, in order, whatever characters they hold', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const odd = ['"quoted"', 'back\\slash', 'line\nbreak\ttab', '{"not": "json"}', 'é ü 中文 🎉', '[1, 2]', '', 'null'];
    const events: NewEvent[] = [submitted(odd.join(' | ')), ...odd.map((message, i): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: `c${i}`, message }, metadata: { actor: message } }))];
    await appendBatch(store.pool, [{ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events }]);
    const read = await store.readTask(taskId);
    expect(read.map((e) => e.data)).toEqual(events.map((e) => e.data));
    expect(read.slice(1).map((e) => e.metadata.actor)).toEqual(odd);
  });

  test('half a character (a lone surrogate, from a cut through an emoji somewhere) is stored as U+FFFD instead of failing the append; a backslash-u written as text stays text', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const message = `cut ${'😀'.slice(0, 1)} here, ${'😀'.slice(1)} there; literally \\ud83d; whole 😀`;
    const events: NewEvent[] = [submitted('p'), { id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message }, metadata: { actor: '😀'.slice(0, 1) } }];
    await appendBatch(store.pool, [{ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events }]);
    const read = await store.readTask(taskId);
    expect(read[1]!.data).toEqual({ code: 'c', message: 'cut \ufffd here, \ufffd there; literally \\ud83d; whole 😀' });
    expect(read[1]!.metadata.actor).toBe('\ufffd');
  });

  test('a wrong expected version is a ConcurrencyError naming both versions, and writes nothing', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const s = taskStreamId(taskId);
    await store.append({ streamId: s, taskId, expectedVersion: 0, events: [submitted()] });
    await expect(store.append({ streamId: s, taskId, expectedVersion: 0, events: [failed()] })).rejects.toThrow(/expected version 0, but it is at 1/);
    await expect(store.append({ streamId: s, taskId, expectedVersion: 5, events: [failed()] })).rejects.toBeInstanceOf(ConcurrencyError);
    expect(await store.readStream(s)).toHaveLength(1);
  });

  test('re-appending the same event ids is an idempotent no-op', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const s = taskStreamId(taskId);
    const events = [submitted(), failed()];
    await store.append({ streamId: s, taskId, expectedVersion: 0, events });
    const again = await store.append({ streamId: s, taskId, expectedVersion: 0, events });
    expect(again).toMatchObject({ duplicate: true, nextVersion: 2 });
    expect(await store.readStream(s)).toHaveLength(2);
  });

  test('N concurrent appenders with the same expected version: exactly one wins per version', async ({ pg: { store } }) => {
    const taskId = randomUUID();
    const s = taskStreamId(taskId);
    await store.append({ streamId: s, taskId, expectedVersion: 0, events: [submitted()] });
    const N = 12;
    for (let version = 1; version <= 5; version++) {
      const results = await Promise.allSettled(Array.from({ length: N }, () => store.append({ streamId: s, taskId, expectedVersion: version, events: [failed()] })));
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost.every((r) => (r as PromiseRejectedResult).reason instanceof ConcurrencyError)).toBe(true);
    }
    const versions = (await store.readStream(s)).map((e) => e.version);
    expect(versions).toEqual([1, 2, 3, 4, 5, 6]);
  });

  test('the log is append-only: UPDATE, DELETE and TRUNCATE are rejected', async ({ pg: { db, store } }) => {
    const taskId = randomUUID();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
    await expect(db.pool.query(`update events set type = 'X'`)).rejects.toThrow(/append-only/);
    await expect(db.pool.query('delete from events')).rejects.toThrow(/append-only/);
    await expect(db.pool.query('truncate events')).rejects.toThrow(/append-only/);
  });

  test("an append of an agent's steps alone sends no NOTIFY, and a tailer can read past steps", async ({ pg: { url, store } }) => {
    const listener = testClient(url);
    await listener.connect();
    const got: string[] = [];
    listener.on('notification', (n) => got.push(n.channel));
    await listener.query('listen baton_events');
    // A round trip on the listening session delivers every notification committed before it.
    const delivered = async (): Promise<number> => (await listener.query('select 1'), got.length);
    const taskId = randomUUID();
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted()] });
    expect(await delivered()).toBe(1);
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const turn: NewEvent = { id: randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'r1', turn: 1, model: 'm', content: [{ type: 'text', text: 'hi' }], stopReason: 'end_turn', usage, offline: true, durationMs: 0 } };
    await store.append({ streamId: `agent-${taskId}-r1`, taskId, expectedVersion: 0, events: [turn] });
    expect(await delivered()).toBe(1); // steps alone: no NOTIFY
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 1, events: [failed()] });
    expect(await delivered()).toBe(2);
    await listener.end();
    // (The horizon is cluster-wide: another test's open transaction may hide the rows for a moment.)
    await expect.poll(async () => (await store.tail(START, 10)).events.map((e) => e.event.type), { timeout: 10_000 }).toEqual(['TaskSubmitted', 'ModelTurnRecorded', 'TaskFailed']);
    expect((await store.tail(START, 10, undefined, ['ModelTurnRecorded', 'ToolResultsRecorded'])).events.map((e) => e.event.type)).toEqual(['TaskSubmitted', 'TaskFailed']);
  });

  test('single, batched and imported appends all send one NOTIFY payload on commit', async ({ pg: { url, db, store } }) => {
    const listener = testClient(url);
    await listener.connect();
    const got: string[] = [];
    listener.on('notification', (n) => got.push(n.payload ?? ''));
    await listener.query('listen baton_events');
    const single = randomUUID();
    await store.append({ streamId: taskStreamId(single), taskId: single, expectedVersion: 0, events: [submitted()] });
    await expect.poll(() => got.length, { timeout: 5000 }).toBe(1);
    const [a, b] = [randomUUID(), randomUUID()];
    await appendBatch(db.pool, [a, b].map((id) => ({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [submitted()] })));
    await expect.poll(() => got.length, { timeout: 5000 }).toBe(2); // one per commit, not one per task
    const forked = randomUUID();
    const imported = await store.importTask({
      taskId: forked,
      events: [
        { streamId: taskStreamId(forked), version: 1, event: submitted() },
        { streamId: `agent-${forked}-r1`, version: 1, event: failed() },
        { streamId: taskStreamId(forked), version: 2, event: failed() },
      ],
      recordedAt: new Date(),
      readModel: { id: forked, tenant_id: 't', status: 'failed', team: 'research', title: 'p', created_at: new Date().toISOString(), updated_at: new Date().toISOString(), version: 2, pending_requests: [], next_deadline: null, watch_since: null, forked_from: null, forked_at_version: null },
    });
    await expect.poll(() => got.length, { timeout: 5000 }).toBe(3);
    expect(got).toEqual([NOTIFY_PAYLOAD, NOTIFY_PAYLOAD, NOTIFY_PAYLOAD]);
    // The import keeps the given log order across streams, and the given versions.
    expect((await store.readTask(forked)).map((e) => [e.streamId.startsWith('task-'), e.version, e.position])).toEqual([
      [true, 1, imported.positions[0]],
      [false, 1, imported.positions[1]],
      [true, 2, imported.positions[2]],
    ]);
    await listener.end();
  });

  test('an import is all or nothing: refused if any of its streams exists, a no-op if retried', async ({ pg: { store } }) => {
    const forked = randomUUID();
    const events = [
      { streamId: taskStreamId(forked), version: 1, event: submitted() },
      { streamId: `agent-${forked}-r1`, version: 1, event: failed() },
    ];
    const readModel = { id: forked, tenant_id: 't', status: 'running' as const, team: 'research', title: 'p', created_at: new Date().toISOString(), updated_at: new Date().toISOString(), version: 1, pending_requests: [], next_deadline: null, watch_since: null, forked_from: null, forked_at_version: null };
    await store.append({ streamId: `agent-${forked}-r1`, taskId: forked, expectedVersion: 0, events: [failed()] });
    await expect(store.importTask({ taskId: forked, events, readModel, recordedAt: new Date() })).rejects.toBeInstanceOf(ConcurrencyError);
    expect(await store.readTask(forked)).toHaveLength(1);
    const other = randomUUID();
    const again = events.map((e) => ({ ...e, streamId: e.streamId.replace(forked, other) }));
    expect((await store.importTask({ taskId: other, events: again, readModel: { ...readModel, id: other }, recordedAt: new Date() })).duplicate).toBe(false);
    expect(await store.importTask({ taskId: other, events: again, readModel: { ...readModel, id: other }, recordedAt: new Date() })).toEqual({ positions: [], duplicate: true });
  });
});

describe('readAll (gap-safe tail)', () => {
  test('a transaction that commits late is still read by a tailing reader', async ({ pg: { url, store } }) => {
    // Transaction A takes a lower position but commits after B; a position-only cursor would skip A.
    const a = testClient(url);
    await a.connect();
    const taskA = randomUUID();
    const taskB = randomUUID();
    await a.query('begin');
    await a.query(`insert into events (stream_id, stream_version, task_id, event_id, type, data) values ($1, 1, $2, $3, 'TaskSubmitted', $4)`, [
      taskStreamId(taskA), taskA, randomUUID(), JSON.stringify(submitted('A').data),
    ]);
    await store.append({ streamId: taskStreamId(taskB), taskId: taskB, expectedVersion: 0, events: [submitted('B')] });

    let cursor: LogCursor = START;
    const seen: string[] = [];
    const drain = async () => {
      for (const { event, cursor: c } of await store.readAll(cursor, 100)) {
        seen.push(event.taskId);
        cursor = c;
      }
    };
    await drain();
    expect(seen).toEqual([]); // B is hidden while A (older transaction) is in flight
    expect((await store.tail(cursor, 10)).hidden).toBe(true);
    await a.query('commit');
    await a.end();
    // The horizon is cluster-wide: other tests' open transactions can hold it back a moment.
    await waitFor(async () => {
      await drain();
      return seen.length === 2;
    }, { what: 'both events visible to the tailer' });
    expect(seen).toEqual([taskA, taskB]);
    expect(await store.tail(cursor, 10)).toEqual({ events: [], hidden: false });
  });

  test('tailing reads by index, whatever the size of the log (no sequential scan of events, generic plan included)', async ({ pg: { url, db, store } }) => {
    // Enough history that a scan would be the wrong plan.
    for (let i = 0; i < 40; i++) {
      const taskId = randomUUID();
      await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted(), ...Array.from({ length: 49 }, failed)] });
    }
    await db.pool.query('analyze events');
    const c = testClient(url);
    await c.connect();
    // Near the end, so a tail reads little. (The horizon is cluster-wide: another test's open transaction may hide rows for a moment.)
    const seen = await waitFor(async () => (await store.readAll(START, 1990, c)).at(1989), { what: 'the history below the horizon' });
    // This transaction's own statistics (no flush to wait for, no other session's scans counted).
    await c.query('begin');
    for (let i = 0; i < 8; i++) { // past the five custom plans, so the prepared statements go generic
      await store.tail(seen.cursor, 100, c, ['ModelTurnRecorded']);
      await store.readAll(seen.cursor, 100, c);
    }
    const scans = (await c.query(`select seq_scan, idx_scan from pg_stat_xact_user_tables where relname = 'events'`)).rows[0];
    await c.query('commit');
    await c.end();
    expect(Number(scans.idx_scan)).toBeGreaterThan(0); // the tails did read events, by index
    expect(Number(scans.seq_scan)).toBe(0);
  });

  test('checkpoints round-trip', async ({ pg: { store } }) => {
    expect(await store.loadCheckpoint('p1')).toEqual(START);
    await store.saveCheckpoint('p1', { txid: 42n, position: 7n });
    expect(await store.loadCheckpoint('p1')).toEqual({ txid: 42n, position: 7n });
  });
});

describe('task commands and the tasks read model', () => {
  test('handleCommand folds, decides, appends and keeps the read model in the same transaction', async ({ pg: { db, store } }) => {
    const taskId = randomUUID();
    const base = { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't1', requestHash: null, forkedFrom: null, workspace: null, budget: null };
    await handleCommand(store, taskId, { type: 'SubmitTask', ...base });
    await handleCommand(store, taskId, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'lead', configVersion: 'v1' });
    const page = await listTasks(db.kysely, { tenantId: 't1', limit: 10 });
    expect(page.items).toMatchObject([{ id: taskId, status: 'running', version: 2 }]);
    await handleCommand(store, taskId, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    expect((await loadTask(store, taskId)).state.status).toBe('cancelled');
    expect((await listTasks(db.kysely, { tenantId: 't1', status: 'cancelled', limit: 10 })).items).toHaveLength(1);
    expect((await listTasks(db.kysely, { tenantId: 'other', limit: 10 })).items).toHaveLength(0);
    await db.pool.query('delete from tasks');
    expect(await rebuildTasksReadModel(db.kysely, store)).toBe(1);
    expect((await listTasks(db.kysely, { tenantId: 't1', limit: 10 })).items).toMatchObject([{ id: taskId, status: 'cancelled', version: 3 }]);
  });

  test("the log records each event at its writer's time: the state folded from it, the read model and the writer's own state agree", async ({ pg: { db, store } }) => {
    const taskId = randomUUID();
    const base = { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't-at', requestHash: null, forkedFrom: null, workspace: null, budget: null };
    // Times far from the database's clock, and apart by less than a millisecond's rounding.
    const at = (ms: number) => () => new Date(Date.UTC(2031, 4, 6, 7, 8, 9, ms));
    await handleCommand(store, taskId, { type: 'SubmitTask', ...base }, { now: at(1) });
    const written = await handleCommand(store, taskId, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'lead', configVersion: 'v1' }, { now: at(2) });
    const loaded = await loadTask(store, taskId);
    expect(loaded.events.map((e) => e.recordedAt.toISOString())).toEqual([at(1)().toISOString(), at(2)().toISOString()]);
    expect(loaded.state).toEqual(written.state);
    expect(loaded.state).toMatchObject({ createdAt: at(1)().toISOString(), updatedAt: at(2)().toISOString() });
    expect((await listTasks(db.kysely, { tenantId: 't-at', limit: 10 })).items).toMatchObject([{ id: taskId, createdAt: at(1)().toISOString(), updatedAt: at(2)().toISOString() }]);
    // A fork's copied history is recorded at the time of the fork.
    const forked = randomUUID();
    const imported = await importTask(store, forked, [{ streamId: taskStreamId(forked), version: 1, event: submitted() }], { now: at(3) });
    const reloaded = await loadTask(store, forked);
    expect(reloaded.events.map((e) => e.recordedAt.toISOString())).toEqual([at(3)().toISOString()]);
    expect(reloaded.state).toEqual(imported.state);
  });

  test("watch_since (the watchdog's index) moves only once it lags a second: a lead's steps update the row in place (HOT)", async ({ pg: { url } }) => {
    // One connection, so that its table statistics can be flushed and read back.
    const client = testClient(url);
    await client.connect();
    try {
      const taskId = randomUUID();
      const t0 = Date.parse('2026-11-25T10:00:00.000Z');
      const at = (ms: number | null) => (ms === null ? null : new Date(t0 + ms).toISOString());
      const row = (version: number, watchMs: number | null): TaskRow => ({ id: taskId, tenant_id: 't', status: watchMs === null ? 'awaiting_input' : 'running', team: 'bench', title: 'x', created_at: at(0)!, updated_at: at(version * 100)!, version, pending_requests: [], next_deadline: null, watch_since: at(watchMs), forked_from: null, forked_at_version: null });
      let version = 0;
      const step = async (watchMs: number | null) => {
        await appendBatch(client, [{ streamId: taskStreamId(taskId), taskId, expectedVersion: version, events: [failed()], readModel: row(++version, watchMs) }]);
        const r = await client.query<{ w: Date | null }>('select watch_since as w from tasks where id = $1', [taskId]);
        return r.rows[0]?.w?.toISOString() ?? null;
      };
      expect(await step(0)).toBe(at(0));
      // Steps within a second of it leave it where it is.
      for (const ms of [100, 400, 900, 999]) expect(await step(ms)).toBe(at(0));
      const hot = async () => {
        await client.query('select pg_stat_force_next_flush()');
        return waitFor(async () => {
          const r = await client.query<{ upd: string; hot: string }>("select n_tup_upd::text as upd, n_tup_hot_upd::text as hot from pg_stat_user_tables where relname = 'tasks'");
          const x = r.rows[0]!;
          return Number(x.upd) === version - 1 ? { updated: Number(x.upd), hot: Number(x.hot) } : null;
        });
      };
      // Every update so far changed no indexed column: all in place.
      expect(await hot()).toEqual({ updated: 4, hot: 4 });
      // A second behind: it moves (one update that touches the index).
      expect(await step(1000)).toBe(at(1000));
      expect(await step(1500)).toBe(at(1000));
      // Cleared at once (only a person can move the task), and set at once again.
      expect(await step(null)).toBe(null);
      expect(await step(1600)).toBe(at(1600));
      // An earlier time (a writer whose clock is behind) is taken at once, not held back by the later one.
      expect(await step(1300)).toBe(at(1300));
    } finally {
      await client.end();
    }
  });

  // In one transaction, now() is one instant for the rows and the question: no timing luck.
  test("the stuck list adds the column's own lag (WATCH_SINCE_LAG_S): a task that stepped less than STUCK_AFTER_MS + lag ago is not stuck", async ({ pg: { db } }) => {
    const afterMs = 2000;
    const busy = randomUUID();
    const idle = randomUUID();
    const stuck = await db.kysely.transaction().execute(async (trx) => {
      for (const [id, idleS] of [[busy, afterMs / 1000 + WATCH_SINCE_LAG_S / 2], [idle, afterMs / 1000 + WATCH_SINCE_LAG_S + 0.5]] as const) {
        await sql`insert into tasks (id, tenant_id, status, team, title, created_at, updated_at, version, pending_requests, watch_since)
                  values (${id}, 'ts', 'running', 'bench', 'x', now(), now(), 1, '[]', now() - make_interval(secs => ${idleS}))`.execute(trx);
      }
      return listTasks(trx, { tenantId: 'ts', limit: 10, stuckAfterMs: afterMs });
    });
    expect(stuck.items.map((t) => t.id)).toEqual([idle]);
  });

  test('list pagination walks every task once', async ({ pg: { db, store } }) => {
    const base = { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null };
    const ids = new Set<string>();
    for (let i = 0; i < 7; i++) {
      const id = randomUUID();
      ids.add(id);
      await handleCommand(store, id, { type: 'SubmitTask', ...base });
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await listTasks(db.kysely, { tenantId: 't', limit: 3, cursor });
      seen.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(new Set(seen)).toEqual(ids);
    expect(seen).toHaveLength(7);
  });
});
