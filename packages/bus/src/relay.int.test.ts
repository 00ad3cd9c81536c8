import { randomUUID } from 'node:crypto';
import { recordAs, taskStreamId, type NewEvent } from '@baton/domain';
import type { EventStore } from '@baton/event-store';
import { stackTest as test, waitFor, writeSyscalls } from '@baton/testing';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import pino from 'pino';
import { describe, expect } from 'vitest';
import { busNames, type BusNames } from './subjects.ts';
import { ensureTopology } from './topology.ts';
import { Relay } from './relay.ts';
import { NotifierAudience } from './audience.ts';
import { WEBHOOK_ENDPOINTS_CHANNEL } from '@baton/db';
import { liveTicksDue, publishWakeUps, RELAYED_CURSOR_HEADER, RELAYED_PREV_HEADER } from './messages.ts';
import type { Msg } from '@nats-io/nats-core';

const log = pino({ level: 'silent' });

async function appendTasks(store: EventStore, n: number, eventsPerTask = 1): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const taskId = randomUUID();
    const events: NewEvent[] = [
      // Not a lead trigger, so each event is exactly one message (triggers are tested below).
      { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: `t${i}`, configVersion: 'v' } },
      ...Array.from({ length: eventsPerTask - 1 }, (): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } })),
    ];
    await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events });
    ids.push(...events.map((e) => e.id));
  }
  return ids;
}

async function publishedIds(jsm: JetStreamManager, js: JetStreamClient, names: BusNames): Promise<string[]> {
  const info = await jsm.streams.info(names.eventsStream);
  const ids: string[] = [];
  if (info.state.messages === 0) return ids;
  const c = await js.consumers.get(names.eventsStream); // ordered consumer, reads everything
  const msgs = await c.fetch({ max_messages: info.state.messages, expires: 2000 });
  for await (const m of msgs) ids.push((m.json() as { id: string }).id);
  return ids;
}

async function setup(nc: Parameters<typeof jetstreamManager>[0], namespace: string) {
  const names = busNames(namespace);
  const jsm = await jetstreamManager(nc);
  await ensureTopology(jsm, names);
  await ensureTopology(jsm, names); // idempotent
  return { names, jsm, js: jetstream(nc) };
}

describe('Relay', () => {
  test('publishes every event once, in log order, and checkpoints', async ({ pg, nats }) => {
    const { names, jsm, js } = await setup(nats.nc, nats.namespace);
    const ids = await appendTasks(pg.store, 20, 3);
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, batchSize: 7 });
    relay.start();
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === ids.length, { what: 'all events published' });
    // live: events appended after start are woken by NOTIFY
    const more = await appendTasks(pg.store, 5);
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === ids.length + more.length, { what: 'live events published' });
    await relay.stop();
    expect(await publishedIds(jsm, js, names)).toEqual([...ids, ...more]);
    const cp = await pg.store.loadCheckpoint('relay');
    expect(cp.position).toBeGreaterThan(0n);
  });

  test("an event bigger than NATS takes (over max_payload) goes out without its data, and the events after it follow: one event cannot hold up every task's", async ({ pg, nats }) => {
    const { names, jsm, js } = await setup(nats.nc, nats.namespace);
    const big = randomUUID();
    const bigEvent: NewEvent = { id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'x'.repeat(1_200_000) } };
    await pg.store.append({ streamId: taskStreamId(big), taskId: big, expectedVersion: 0, events: [bigEvent] });
    const after = await appendTasks(pg.store, 3);
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, batchSize: 7 });
    relay.start();
    try {
      await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === 1 + after.length, { what: 'the big event and the ones after it published' });
    } finally {
      await relay.stop();
    }
    expect(await publishedIds(jsm, js, names)).toEqual([bigEvent.id, ...after]);
    const first = await (await js.consumers.get(names.eventsStream)).next({ expires: 2000 });
    expect(first?.json()).toMatchObject({ id: bigEvent.id, type: 'TaskFailed', data: null });
  });

  test('killed mid-batch: nothing is lost and re-published duplicates are dropped', async ({ pg, nats }) => {
    const { names, jsm, js } = await setup(nats.nc, nats.namespace);
    const ids = await appendTasks(pg.store, 30);
    // Wait until all 30 are below the (cluster-wide) horizon, so they form one batch.
    await waitFor(async () => (await pg.store.readAll({ txid: 0n, position: 0n }, 100)).length === 30, { what: 'all events visible' });
    // The first relay "crashes" after 12 PubAcks of a 30-event batch, before its checkpoint.
    const crashing = new Relay({
      pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, batchSize: 30,
      afterPublish: (n) => {
        if (n === 12) throw new Error('simulated crash');
      },
    });
    crashing.start();
    await waitFor(() => crashing.crashed !== null, { what: 'simulated crash' });
    await crashing.stop();
    expect((await pg.store.loadCheckpoint('relay')).position).toBe(0n); // no checkpoint was saved
    const published = (await jsm.streams.info(names.eventsStream)).state.messages;
    expect(published).toBeGreaterThanOrEqual(12);

    const successor = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    successor.start();
    await waitFor(async () => (await pg.store.loadCheckpoint('relay')).position > 0n, { what: 'successor checkpoint' });
    await successor.stop();
    expect(successor.published).toBe(30); // it re-sent the whole batch...
    const seen = await publishedIds(jsm, js, names);
    expect(seen).toHaveLength(30); // ...but JetStream kept each event once
    expect(new Set(seen)).toEqual(new Set(ids));
  });

  test('two relays: exactly one leads and publishes; the other takes over when it stops', async ({ pg, nats }) => {
    const { names, jsm, js } = await setup(nats.nc, nats.namespace);
    const a = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    const b = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    a.start();
    await waitFor(() => a.leader, { what: 'a leads' });
    b.start();
    const first = await appendTasks(pg.store, 10);
    // By a's count of PubAcks: the stream may report a message stored before its PubAck reaches a.
    await waitFor(() => a.published === 10, { what: 'first batch acknowledged' });
    expect((await jsm.streams.info(names.eventsStream)).state.messages).toBe(10);
    expect(b.published).toBe(0);
    expect(b.leader).toBe(false);

    await a.stop();
    await waitFor(() => b.leader, { what: 'b takes over' });
    const second = await appendTasks(pg.store, 10);
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === 20, { what: 'second batch' });
    await b.stop();
    expect(b.published).toBe(10);
    expect(await publishedIds(jsm, js, names)).toEqual([...first, ...second]);
  });

  test('lead-trigger events are also published on the triggers subject (the orchestrator filters on it)', async ({ pg, nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const taskId = randomUUID();
    await pg.store.append({
      streamId: taskStreamId(taskId), taskId, expectedVersion: 0,
      events: [
        { id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null } },
        { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } },
      ],
    });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    relay.start();
    await waitFor(() => relay.published === 3, { what: 'two events and one trigger' });
    await relay.stop();
    const info = await jsm.streams.info(names.eventsStream, { subjects_filter: '>' });
    expect(info.state.subjects).toEqual({
      [names.eventSubject(taskId, 'TaskSubmitted')]: 1,
      [names.eventSubject(taskId, 'TaskStarted')]: 1,
      [names.triggerSubject(taskId, 'TaskSubmitted')]: 1,
    });
  });

  test('with an audience: transitions the notifier does not serve go out as core-NATS signals, in no stream; the rest, the triggers included, go to the stream', async ({ pg, nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const submitted = (tenantId: string, webhook: { url: string; events: string[] } | null) => ({ id: randomUUID(), type: 'TaskSubmitted' as const, data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook, metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null } });
    const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
    const quiet = randomUUID(); // tenant q: no endpoints, no webhook of its own
    const hooked = randomUUID(); // a webhook of its own
    const tenantWide = randomUUID(); // tenant e has an endpoint
    const unknown = randomUUID(); // no submission seen (relayed before this relay led): served
    for (const [taskId, first] of [[quiet, submitted('q', null)], [hooked, submitted('q', { url: 'https://example.com/h', events: ['event.TaskStarted'] })], [tenantWide, submitted('e', null)]] as const) {
      await pg.store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [first, started()] });
    }
    await pg.store.append({ streamId: taskStreamId(unknown), taskId: unknown, expectedVersion: 0, events: [started()] });
    const signals: string[] = [];
    const sub = nats.nc.subscribe(`${names.signalSubject('*', '*')}`, { callback: (_e, m) => void signals.push(m.subject) });
    await nats.nc.flush();
    let reads = 0;
    const audience = new NotifierAudience({ tenantsWithEndpoints: async () => (reads++, ['e']), refreshMs: 3_600_000 });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, audience });
    relay.start();
    await waitFor(() => signals.length === 2, { what: 'the quiet task\'s two transitions as signals' });
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === 8, { what: 'the others\' transitions and triggers in the stream' });
    await relay.stop();
    sub.unsubscribe();
    expect(signals.sort()).toEqual([names.signalSubject(quiet, 'TaskStarted'), names.signalSubject(quiet, 'TaskSubmitted')].sort());
    expect((await jsm.streams.info(names.eventsStream, { subjects_filter: '>' })).state.subjects).toEqual({
      [names.eventSubject(hooked, 'TaskSubmitted')]: 1,
      [names.eventSubject(hooked, 'TaskStarted')]: 1,
      [names.eventSubject(tenantWide, 'TaskSubmitted')]: 1,
      [names.eventSubject(tenantWide, 'TaskStarted')]: 1,
      [names.eventSubject(unknown, 'TaskStarted')]: 1,
      // A lead trigger is the orchestrator's, whoever the notifier serves.
      [names.triggerSubject(quiet, 'TaskSubmitted')]: 1,
      [names.triggerSubject(hooked, 'TaskSubmitted')]: 1,
      [names.triggerSubject(tenantWide, 'TaskSubmitted')]: 1,
    });
    expect(relay.published).toBe(10); // signals are counted as sent
    expect(reads).toBe(1); // once when the relay began to lead; not per batch
  });

  test('each relayed event carries its place in the log and its task\'s previous relayed event\'s (none for a task\'s first since the relay began to lead or rewound, none after its final event); signals and stored events alike', async ({ pg, nats }) => {
    const { names } = await setup(nats.nc, nats.namespace);
    const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const step = (): NewEvent => ({ id: randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [], stopReason: 'end_turn', usage, offline: true, durationMs: 0 } });
    const failed = (): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } });
    const mailed = (): NewEvent => ({ id: randomUUID(), type: 'EmailSent', data: { emailId: randomUUID(), messageId: 'm', accepted: ['a@example.com'], rejected: [] } });
    const a = randomUUID(); // served: its transitions go to the stream
    const b = randomUUID(); // a quiet tenant's: signals
    await pg.store.append({ streamId: taskStreamId(a), taskId: a, expectedVersion: 0, events: [started()] });
    await pg.store.append({ streamId: taskStreamId(b), taskId: b, expectedVersion: 0, events: [{ id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'q', requestHash: null, forkedFrom: null, workspace: null, budget: null } }] });
    await pg.store.append({ streamId: taskStreamId(a), taskId: a, expectedVersion: 1, events: [step()] }); // not relayed: a link skips it, as a stream of transitions does
    await pg.store.append({ streamId: taskStreamId(b), taskId: b, expectedVersion: 1, events: [started()] });
    await pg.store.append({ streamId: taskStreamId(a), taskId: a, expectedVersion: 2, events: [started(), failed()] });
    await pg.store.append({ streamId: taskStreamId(a), taskId: a, expectedVersion: 4, events: [mailed()] }); // after the final event
    const got: { task: string; id: string; cursor: string | undefined; prev: string | undefined }[] = [];
    const take = (_e: Error | null, m: Msg): void => {
      const task = m.subject.split('.').at(-2) as string;
      got.push({ task: task === a ? 'a' : 'b', id: (m.json() as { id: string }).id, cursor: m.headers?.get(RELAYED_CURSOR_HEADER), prev: m.headers?.get(RELAYED_PREV_HEADER) || undefined });
    };
    const subs = [nats.nc.subscribe(names.signalSubject('*', '*'), { callback: take }), nats.nc.subscribe(names.eventSubject('*', '*'), { callback: take })];
    await nats.nc.flush();
    const audience = new NotifierAudience({ tenantsWithEndpoints: async () => [], refreshMs: 3_600_000 });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, audience, batchSize: 2 });
    relay.start();
    await waitFor(() => got.length === 6, { what: 'six transitions relayed' });
    const places = new Map((await pg.db.pool.query<{ event_id: string; place: string }>(`select event_id::text, transaction_id::text || ':' || global_position as place from events`)).rows.map((r) => [r.event_id, r.place]));
    const place = (i: number): string | undefined => places.get((got[i] as { id: string }).id);
    expect(got.map((g) => g.task)).toEqual(['a', 'b', 'b', 'a', 'a', 'a']);
    got.forEach((g, i) => expect(g.cursor).toBe(place(i)));
    // Linked across batches of two; the first of each task is not; nothing after the final event is.
    const links = [undefined, undefined, place(1), place(0), place(3), undefined];
    expect(got.map((g) => g.prev)).toEqual(links);
    // Rewound to the start: what is published again is linked from there only.
    got.length = 0;
    relay.rewind({ txid: 0n, position: 0n });
    await waitFor(() => got.length === 6, { what: 'the log published again' });
    expect(got.map((g) => g.prev)).toEqual(links);
    await relay.stop();
    for (const s of subs) s.unsubscribe();
  });

  test('a tenant\'s first webhook endpoint applies to the next transitions relayed: Postgres announces the change (not the refresh period)', async ({ pg, nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const submit = async (tenantId: string): Promise<string> => {
      const taskId = randomUUID();
      await pg.store.append({
        streamId: taskStreamId(taskId), taskId, expectedVersion: 0,
        events: [
          { id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null } },
          { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } },
        ],
      });
      return taskId;
    };
    const signals: string[] = [];
    const sub = nats.nc.subscribe(names.signalSubject('*', '*'), { callback: (_e, m) => void signals.push(m.subject) });
    await nats.nc.flush();
    const audience = new NotifierAudience({
      tenantsWithEndpoints: async (db) => (await db.query<{ tenant_id: string }>('select distinct tenant_id from webhook_endpoints')).rows.map((r) => r.tenant_id),
      refreshMs: 3_600_000,
      channel: WEBHOOK_ENDPOINTS_CHANNEL,
    });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, audience });
    relay.start();
    const before = await submit('t');
    await waitFor(() => signals.length === 2, { what: 'a task of a tenant without endpoints: signals' });
    await pg.db.pool.query(`insert into webhook_endpoints (id, tenant_id, url, events, secret) values ($1, 't', 'https://example.com/h', '{event.TaskStarted}', 'whsec_x')`, [randomUUID()]);
    const after = await submit('t');
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === 4, { what: 'the next task\'s transitions (and trigger) in the stream' });
    await relay.stop();
    sub.unsubscribe();
    expect(signals.sort()).toEqual([names.signalSubject(before, 'TaskStarted'), names.signalSubject(before, 'TaskSubmitted')].sort());
    expect(Object.keys((await jsm.streams.info(names.eventsStream, { subjects_filter: '>' })).state.subjects ?? {}).sort()).toEqual(
      [names.eventSubject(after, 'TaskStarted'), names.eventSubject(after, 'TaskSubmitted'), names.triggerSubject(before, 'TaskSubmitted'), names.triggerSubject(after, 'TaskSubmitted')].sort(),
    );
  });

  test('fast path: a writer publishes wake-ups right after its commit; the relay\'s copies are dropped as duplicates', async ({ pg, nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const taskId = randomUUID();
    const submitted = { id: randomUUID(), type: 'TaskSubmitted' as const, data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null } };
    const dispatched = { id: randomUUID(), type: 'SubagentDispatched' as const, data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 't', prompt: 'p' } };
    const res = await pg.store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted, dispatched] });
    const recorded = [submitted, dispatched].map((e, i) => recordAs(e, { taskId, streamId: taskStreamId(taskId), version: i + 1, position: res.positions[i]!, recordedAt: new Date() }));
    publishWakeUps(nats.nc, names, recorded);
    await nats.nc.flush();
    // Before any relay: the trigger and the job are there, the events themselves are not.
    await waitFor(async () => (await jsm.streams.info(names.jobsStream)).state.messages === 1, { what: 'the job from the fast path' });
    expect((await jsm.streams.info(names.eventsStream, { subjects_filter: '>' })).state.subjects).toEqual({ [names.triggerSubject(taskId, 'TaskSubmitted')]: 1 });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    relay.start();
    await waitFor(() => relay.published === 4, { what: 'two events, one trigger and one job acknowledged' });
    await relay.stop();
    expect((await jsm.streams.info(names.eventsStream, { subjects_filter: '>' })).state.subjects).toEqual({
      [names.eventSubject(taskId, 'TaskSubmitted')]: 1,
      [names.eventSubject(taskId, 'SubagentDispatched')]: 1,
      [names.triggerSubject(taskId, 'TaskSubmitted')]: 1,
    });
    expect((await jsm.streams.info(names.jobsStream)).state.messages).toBe(1);
  });

  test('fast path: the wake-ups of commits that finish in separate callbacks of one event-loop turn go out in one socket write', async ({ nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const n = 10;
    const round = (r: number) =>
      Array.from({ length: n }, (_, i) => {
        const taskId = randomUUID();
        const e = { id: randomUUID(), type: 'TaskSubmitted' as const, data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null } };
        return [recordAs(e, { taskId, streamId: taskStreamId(taskId), version: 1, position: BigInt(r * n + i + 1), recordedAt: new Date() })];
      });
    // The process's writes are counted, so another connection's (a ping, a pool's) may land in a round:
    // the fewest of three rounds is the fast path's own. Without coalescing each round is 10 writes or more.
    const writes: number[] = [];
    for (let r = 0; r < 3; r++) {
      const commits = round(r);
      const before = writeSyscalls();
      // Each commit's wake-ups are published from its own callback (as after its own Postgres reply).
      await Promise.all(commits.map((recorded) => new Promise<void>((done) => setImmediate(() => (publishWakeUps(nats.nc, names, recorded), done())))));
      for (let i = 0; i < 3; i++) await new Promise((done) => setImmediate(done)); // the turn that sends them
      writes.push(writeSyscalls() - before);
    }
    expect(Math.min(...writes)).toBeLessThanOrEqual(2);
    await waitFor(async () => (await jsm.streams.info(names.eventsStream)).state.messages === 3 * n, { what: 'every trigger stored' });
  });

  test('fast path: the steps of many tasks committed in one turn send one live tick naming each task once; the next burst one more', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const ticks: string[][] = [];
    const sub = nats.nc.subscribe(names.liveTicks, { callback: (_err, m) => void ticks.push(JSON.parse(m.string()) as string[]) });
    await nats.nc.flush();
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const steps = (taskIds: string[]): void => {
      for (let turn = 1; turn <= 3; turn++) {
        for (const taskId of taskIds) {
          const e = { id: randomUUID(), type: 'ModelTurnRecorded' as const, data: { agentId: 'lead', turn, model: 'm', content: [{ type: 'text' as const, text: 't' }], stopReason: 'end_turn', usage, offline: true, durationMs: 0 } };
          publishWakeUps(nats.nc, names, [recordAs(e, { taskId, streamId: taskStreamId(taskId), version: turn, position: BigInt(turn), recordedAt: new Date() })]);
        }
      }
    };
    const first = Array.from({ length: 20 }, () => randomUUID());
    steps(first);
    await waitFor(async () => (await nats.nc.flush(), ticks.length === 1), { what: 'the first tick' });
    // Sixty steps of twenty tasks in one message (before: one per task, twenty; before the rate limit, sixty).
    expect(ticks).toEqual([first]);
    // The next burst, within the gap (sent at its end) or after it (at once): one message either way.
    const second = Array.from({ length: 20 }, () => randomUUID());
    steps(second);
    await waitFor(async () => (await nats.nc.flush(), liveTicksDue() === 0 && ticks.length === 2), { what: 'the second tick' });
    sub.unsubscribe();
    expect(ticks).toEqual([first, second]);
  });

  test('runner jobs are derived from SubagentDispatched and deduplicated by event id', async ({ pg, nats }) => {
    const { names, jsm } = await setup(nats.nc, nats.namespace);
    const taskId = randomUUID();
    await pg.store.append({
      streamId: taskStreamId(taskId), taskId, expectedVersion: 0,
      events: [{ id: randomUUID(), type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } }],
    });
    const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    relay.start();
    await waitFor(async () => (await jsm.streams.info(names.jobsStream)).state.messages === 1, { what: 'job published' });
    await relay.stop();
    await pg.store.saveCheckpoint('relay', { txid: 0n, position: 0n }); // force a full re-publish
    const again = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    again.start();
    await waitFor(() => again.published === 2, { what: 're-published' }); // the event and its job
    await again.stop();
    expect((await jsm.streams.info(names.jobsStream)).state.messages).toBe(1);
    expect((await jsm.streams.info(names.eventsStream)).state.messages).toBe(1);
  });
});
