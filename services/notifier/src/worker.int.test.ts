import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { busNames, ensureTopology, NotifierAudience, Relay, type BusNames } from '@baton/bus';
import { WEBHOOK_ENDPOINTS_CHANNEL } from '@baton/db';
import { forkEvents, type Command } from '@baton/domain';
import { handleCommand, importTask } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { createEndpoint, createTaskWebhookSecret, deleteEndpoint, updateEndpoint, listDeliveries, requestRedelivery, rotateEndpointSecret, rotateTaskWebhookSecret, tenantsWithEndpoints } from '@baton/storage';
import { stackTest as test, waitFor, type NatsFixture, type PgFixture } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect } from 'vitest';
import { verify } from './webhook.ts';
import { startNotifier } from './worker.ts';
import { startRedeliveries } from './redeliver.ts';
import { webhookAgent } from './egress.ts';

const log = silentLogger();
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

/** A relay and a notifier on the test's database and NATS namespace. */
async function startStack(pg: PgFixture, nats: NatsFixture, o: { maxAttempts: number; backoffMs: number[]; allowPrivateNetworks: boolean; redeliverEveryMs?: number; endpointsCacheMs?: number; ackWaitMs?: number; beforeNotifier?: () => Promise<void> }, audience?: NotifierAudience) {
  const names = busNames(nats.namespace);
  await ensureTopology(await jetstreamManager(nats.nc), names, o.ackWaitMs ? { ackWaitMs: { notifier: o.ackWaitMs } } : {});
  const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log, ...(audience ? { audience } : {}) });
  relay.start();
  await o.beforeNotifier?.();
  const notifier = await startNotifier({
    store: pg.store, pool: pg.db.pool, js: jetstream(nats.nc), names, log, secret: SECRET, timeoutMs: 2000, concurrency: 4, now: () => new Date(), ...o,
  });
  return { names, stop: async () => { await notifier.stop(); await relay.stop(); } };
}

function submit(pg: PgFixture, webhook: { url: string; events: string[] } | null, tenantId = 'd'): Promise<string> {
  const id = randomUUID();
  return handleCommand(pg.store, id, {
    type: 'SubmitTask', prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook,
    metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null,
  }).then(() => id);
}

describe('notifier', () => {
  /** A task cancelled with a webhook to a receiver that always answers 500 (counting its POSTs), and notifiers that took its message twice and died before settling it. */
  async function cancelledTwiceTaken(pg: PgFixture, nats: NatsFixture) {
    const hook = { posted: 0 };
    const server = createServer((_req, res) => {
      hook.posted++;
      res.writeHead(500).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const id = await submit(pg, { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, events: ['task.cancelled'] });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'because', requestedBy: 'u' });
    const takeAndDie = async (): Promise<void> => {
      const names = busNames(nats.namespace);
      const raw = await jetstream(nats.nc).consumers.get(names.eventsStream, names.consumers.notifier);
      let count = 0;
      await waitFor(async () => {
        const m = await raw.next({ expires: 1000 });
        if (m?.subject.endsWith('TaskCancelled')) count = m.info.deliveryCount;
        return count >= 2;
      }, { timeoutMs: 20_000, what: 'the message taken twice and never settled' });
    };
    return { id, hook, takeAndDie, close: () => server.close() };
  }

  test('a notifier that died mid-way is not an attempt: a message its notifiers twice took and never settled is still tried as often as allowed, the last given up', async ({ pg, nats }) => {
    const { id, hook, takeAndDie, close } = await cancelledTwiceTaken(pg, nats);
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, ackWaitMs: 300, beforeNotifier: takeAndDie });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).some((r) => r.givenUp), { timeoutMs: 20_000, what: 'the webhook given up' });
    await stack.stop();
    close();
    // Before, the bus's count (two deaths and one try) made the first attempt the last.
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.statusCode, d.givenUp])).toEqual([[1, 500, false], [2, 500, false], [3, 500, true]]);
    expect(hook.posted).toBe(3);
  });

  test('a message back past its attempts unsettled (notifiers kept stopping mid-way): each webhook it owed is given up, said as its next attempt — not left on a failure that reads like a retry to come; nothing sent', async ({ pg, nats }) => {
    const { id, hook, takeAndDie, close } = await cancelledTwiceTaken(pg, nats);
    const stack = await startStack(pg, nats, { maxAttempts: 1, backoffMs: [50], allowPrivateNetworks: true, ackWaitMs: 300, beforeNotifier: takeAndDie });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 1, { timeoutMs: 20_000, what: 'the webhook given up' });
    await stack.stop();
    close();
    expect(hook.posted).toBe(0);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok, d.givenUp, d.type, d.error])).toEqual([[1, false, true, 'task.cancelled', expect.stringMatching(/^given up: delivered \d+ times, past the \d+ attempts allowed, without being settled/)]]);
  });

  test('a failing endpoint is retried with backoff until it accepts; every attempt is recorded; a task without a webhook gets none', async ({ pg, nats }) => {
    const received: { status: number; id: string; body: string; ok: boolean }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const n = received.length;
        const status = n === 0 ? 500 : n === 1 ? 503 : 204;
        const ok = verify(SECRET, { id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']), signature: String(req.headers['webhook-signature']) }, body);
        received.push({ status, id: String(req.headers['webhook-id']), body, ok });
        res.writeHead(status, status === 503 ? { 'retry-after': '0' } : {}).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;

    const stack = await startStack(pg, nats, { maxAttempts: 5, backoffMs: [50, 100], allowPrivateNetworks: true });
    const quiet = await submit(pg, null);
    const id = await submit(pg, { url, events: ['task.cancelled'] });
    await handleCommand(pg.store, quiet, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'because', requestedBy: 'u' });

    await waitFor(async () => (await pg.db.pool.query('select count(*)::int as n from webhook_deliveries where ok')).rows[0].n === 1, { what: 'a successful delivery' });
    await stack.stop();
    server.close();

    expect(received.map((r) => r.status)).toEqual([500, 503, 204]);
    expect(new Set(received.map((r) => r.id))).toEqual(new Set([received[0]?.id])); // one webhook-id across retries
    expect(received.every((r) => r.ok)).toBe(true);
    expect(JSON.parse(received[2]?.body ?? '{}')).toMatchObject({ type: 'task.cancelled', data: { task: { id, status: 'cancelled' } } });
    const rows = (await pg.db.pool.query('select task_id, attempt, status_code, ok, error from webhook_deliveries order by id')).rows;
    expect(rows).toEqual([
      { task_id: id, attempt: 1, status_code: 500, ok: false, error: 'HTTP 500' },
      { task_id: id, attempt: 2, status_code: 503, ok: false, error: 'HTTP 503' },
      { task_id: id, attempt: 3, status_code: 204, ok: true, error: null },
    ]);
  });
});

/**
 * Wait until the notifier has handled every event it was sent (none pending or unacknowledged)
 * and at least `deliveries` deliveries succeeded: what came can then be counted, more included.
 */
async function settled(pg: PgFixture, nats: NatsFixture, names: BusNames, deliveries: number): Promise<void> {
  const jsm = await jetstreamManager(nats.nc);
  await waitFor(async () => {
    const info = await jsm.consumers.info(names.eventsStream, names.consumers.notifier);
    return info.delivered.stream_seq > 0 && info.num_pending === 0 && info.num_ack_pending === 0 && (await pg.db.pool.query('select count(*)::int as n from webhook_deliveries where ok')).rows[0].n >= deliveries;
  }, { what: 'the notifier to handle every event' });
}

/** Once the task's first delivery is recorded, ask for it to be sent again, and wait for that attempt: the first. */
async function redeliverFirst(pg: PgFixture, id: string) {
  await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 1, { what: 'the first delivery' });
  const [first] = await listDeliveries(pg.db.pool, id);
  await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'u' });
  await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 2, { what: 'the redelivery' });
  return first;
}

/** A receiver that accepts every webhook (204) and keeps what it got. */
async function receiver() {
  const received: { id: string; body: { type: string; data: { task: { id: string; status: string } } }; raw: string; headers: { id: string; timestamp: string; signature: string } }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const headers = { id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']), signature: String(req.headers['webhook-signature']) };
      received.push({ id: headers.id, body: JSON.parse(body), raw: body, headers });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { received, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, close: () => server.close() };
}

describe('notifier status changes', () => {
  test('task.running from the status change; one event can make several messages, each with its own webhook-id', async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true });
    const id = await submit(pg, { url: hooks.url, events: ['task.running', 'task.cancelled', 'event.TaskCancelled'] });
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await pg.db.pool.query('select count(*)::int as n from webhook_deliveries where ok')).rows[0].n === 3, { what: 'three deliveries' });
    await stack.stop();
    hooks.close();
    expect(hooks.received.map((r) => `${r.body.type}:${r.body.data.task.status}`).sort()).toEqual(['event.TaskCancelled:cancelled', 'task.cancelled:cancelled', 'task.running:running']);
    expect(new Set(hooks.received.map((r) => r.id)).size).toBe(3);
    // An event.* message carries the event as the API lists it (which event, its data); the others do not.
    const byType = new Map(hooks.received.map((r) => [r.body.type, r.body.data as Record<string, unknown>]));
    expect(byType.get('event.TaskCancelled')?.event).toMatchObject({ type: 'TaskCancelled', taskId: id, streamId: `task-${id}`, version: 3, data: { reason: 'r', requestedBy: 'u' } });
    expect(Object.keys(byType.get('task.cancelled') ?? {})).toEqual(['task']);
  });
});

describe('notifier and a subagent\'s start', () => {
  test('agent.started once per subagent, though a runner records each attempt\'s start twice (its claim on the task stream, then the fence on the agent\'s own stream)', async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true });
    const id = await submit(pg, { url: hooks.url, events: ['agent.started', 'event.SubagentStarted'] });
    const run = (c: Command) => handleCommand(pg.store, id, c);
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' });
    await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }] });
    await run({ type: 'DispatchSubagent', agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' });
    // As the runner claims an attempt (claimAttempt): on the task stream, then on the agent's stream.
    for (const attempt of [1, 2]) {
      await run({ type: 'StartSubagent', agentId: 'researcher-1', attempt, runnerId: `r${attempt}` });
      await run({ type: 'ClaimAgentStream', agentId: 'researcher-1', attempt, runnerId: `r${attempt}` });
    }
    const started = (await pg.store.readTask(id)).filter((e) => e.type === 'SubagentStarted');
    expect(new Set(started.map((e) => e.streamId)).size).toBe(2); // both streams, as the runner writes them
    await settled(pg, nats, stack.names, 5);
    await stack.stop();
    hooks.close();
    expect(hooks.received.map((r) => r.body.type).sort()).toEqual(['agent.started', 'event.SubagentStarted', 'event.SubagentStarted', 'event.SubagentStarted', 'event.SubagentStarted']);
  });
});

describe('notifier and a fork', () => {
  test('a fork\'s copied history makes no webhook message: the fork notifies what happens after it', async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true });
    const source = await submit(pg, { url: hooks.url, events: ['task.running', 'task.cancelled', 'event.TaskStarted'] });
    await handleCommand(pg.store, source, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' });
    const fork = randomUUID();
    await importTask(pg.store, fork, forkEvents(await pg.store.readTask(source), 2, fork, { now: new Date(), requestedBy: 'u' }));
    await handleCommand(pg.store, fork, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await settled(pg, nats, stack.names, 3);
    await stack.stop();
    hooks.close();
    const got = hooks.received.map((r) => `${(r.body.data.task as unknown as { id: string }).id === fork ? 'fork' : 'source'} ${r.body.type}`).sort();
    expect(got).toEqual(['fork task.cancelled', 'source event.TaskStarted', 'source task.running']);
  });
});

describe('notifier and a fork at an open request', () => {
  test("a request still open at the fork point is the fork's own (a fresh deadline): its person is told, once; one decided before the fork point is not told again", async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true });
    const source = await submit(pg, { url: hooks.url, events: ['task.awaiting_input', 'request.opened'] });
    const run = (c: Command) => handleCommand(pg.store, source, c);
    await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' });
    await run({
      type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0,
      content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }, { type: 'tool_use', id: 'tu2', name: 'ask_user', input: { questions: ['Which sources?'] } }],
      usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
    });
    const deadline = new Date(Date.now() + 600_000).toISOString();
    await run({ type: 'RequestApproval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'plan', deadline, onTimeout: 'reject' });
    await run({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', decidedBy: 'u' });
    await run({ type: 'RequestClarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu2', questions: ['Which sources?'], context: 'c', deadline });
    const fork = randomUUID();
    const source0 = await pg.store.readTask(source);
    await importTask(pg.store, fork, forkEvents(source0, source0.findLast((e) => e.streamId.startsWith('task-'))!.version, fork, { now: new Date(), requestedBy: 'u' }));
    await settled(pg, nats, stack.names, 6);
    await stack.stop();
    hooks.close();
    const got = hooks.received.map((r) => {
      const { task: t, request } = r.body.data as unknown as { task: { id: string; pendingRequests: { requestId: string }[] }; request?: { requestId: string; kind: string } };
      return `${t.id === fork ? 'fork' : 'source'} ${r.body.type} ${request ? `${request.kind} ${request.requestId}` : t.pendingRequests.map((p) => p.requestId).join(',')}`;
    });
    // Each request announced once as request.opened (with the request), the fork's reopened one too.
    expect(got.sort()).toEqual(['fork request.opened clarification clr-1', 'fork task.awaiting_input clr-1', 'source request.opened approval apr-1', 'source request.opened clarification clr-1', 'source task.awaiting_input apr-1', 'source task.awaiting_input clr-1']);
  });
});

describe('notifier redelivery', () => {
  test('a redelivery request sends the message again (same webhook-id, fresh signature) and records it as the next attempt', async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, redeliverEveryMs: 50 });
    const id = await submit(pg, { url: hooks.url, events: ['task.cancelled'] });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    const first = await redeliverFirst(pg, id);
    await stack.stop();
    hooks.close();
    const rows = await listDeliveries(pg.db.pool, id);
    expect(rows.map((r) => [r.webhookId, r.type, r.attempt, r.ok, r.redelivery])).toEqual([
      [first!.webhookId, 'task.cancelled', 1, true, false],
      [first!.webhookId, 'task.cancelled', 2, true, true],
    ]);
    expect(hooks.received.map((r) => [r.id, r.body.type, r.body.data.task.status])).toEqual([
      [first!.webhookId, 'task.cancelled', 'cancelled'],
      [first!.webhookId, 'task.cancelled', 'cancelled'],
    ]);
    expect((await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries where done_at is null')).rows[0].n).toBe(0);
  });

  test('two notifiers and slow receivers: each redelivery request is sent once (a batch claimed under one lease had its tail taken by the other while still being sent)', async ({ pg, nats }) => {
    const received: string[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => setTimeout(() => {
        received.push(String(req.headers['webhook-id']));
        res.writeHead(204).end();
      }, 300));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, redeliverEveryMs: 3_600_000 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const id = await submit(pg, { url, events: ['task.cancelled'] });
      await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
      ids.push(id);
    }
    await waitFor(async () => (await Promise.all(ids.map((id) => listDeliveries(pg.db.pool, id)))).every((l) => l.length === 1), { what: 'the first deliveries' });
    await stack.stop();
    for (const id of ids) await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: (await listDeliveries(pg.db.pool, id))[0]!.id, requestedBy: 'u' });
    // Each claim's lease covers one slow send, not four.
    const deps = { store: pg.store, pool: pg.db.pool, log, timeoutMs: 2000, now: () => new Date(), agent: webhookAgent({ allowPrivateNetworks: true }), secret: SECRET, everyMs: 20, leaseMs: 700, mail: null };
    const both = [startRedeliveries(deps), startRedeliveries(deps)];
    await waitFor(async () => (await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries where done_at is null')).rows[0].n === 0, { timeoutMs: 20_000, what: 'every request done' });
    for (const r of both) await r.stop();
    server.close();
    expect(received).toHaveLength(4 + 4);
    for (const id of ids) expect((await listDeliveries(pg.db.pool, id)).map((r) => r.attempt)).toEqual([1, 2]);
  });

  test('a redelivered request.opened carries its request, as the first did', async ({ pg, nats }) => {
    const hooks = await receiver();
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, redeliverEveryMs: 50 });
    const id = await submit(pg, { url: hooks.url, events: ['request.opened'] });
    const run = (c: Command) => handleCommand(pg.store, id, c);
    await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' });
    await run({
      type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0,
      content: [{ type: 'tool_use', id: 'tu1', name: 'ask_user', input: { questions: ['Which sources?'] } }],
      usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
    });
    await run({ type: 'RequestClarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu1', questions: ['Which sources?'], context: 'c', deadline: new Date(Date.now() + 600_000).toISOString() });
    await redeliverFirst(pg, id);
    await stack.stop();
    hooks.close();
    const requests = hooks.received.map((r) => (r.body.data as unknown as { request?: { requestId: string; kind: string } }).request);
    expect(requests).toEqual([expect.objectContaining({ requestId: 'clr-1', kind: 'clarification' }), expect.objectContaining({ requestId: 'clr-1', kind: 'clarification' })]);
    expect(hooks.received[1]?.id).toBe(hooks.received[0]?.id);
  });

  test('a redelivery to an endpoint deleted since is not sent, and says so where it was asked for: a failed attempt naming why', async ({ pg, nats }) => {
    const hooks = await receiver();
    const endpoint = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${hooks.url}?tenant`, events: ['task.cancelled'], secret: SECRET });
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, redeliverEveryMs: 50, endpointsCacheMs: 0 });
    const id = await submit(pg, null);
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 1, { what: 'the endpoint delivery' });
    const [first] = await listDeliveries(pg.db.pool, id);
    expect(await deleteEndpoint(pg.db.pool, 'd', endpoint.id)).toBe(true);
    await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'u' });
    await waitFor(async () => (await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries where done_at is null')).rows[0].n === 0, { what: 'the request handled' });
    await stack.stop();
    hooks.close();
    expect((await listDeliveries(pg.db.pool, id)).map((r) => [r.webhookId, r.endpointId, r.attempt, r.ok, r.redelivery, r.statusCode, r.error, r.url])).toEqual([
      [first!.webhookId, endpoint.id, 1, true, false, 204, null, `${hooks.url}?tenant`],
      [first!.webhookId, endpoint.id, 2, false, true, null, 'not sent: the endpoint was deleted', `${hooks.url}?tenant`],
    ]);
    expect(hooks.received).toHaveLength(1);
  });
  test('a message owed to an endpoint deleted, or changed to no longer take its type, while it was being retried is given up on the next try, saying why (not left reading like a retry to come)', async ({ pg, nats }) => {
    // Two endpoints that refuse everything (500) until the end.
    const server = createServer((_req, res) => void res.writeHead(500).end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const changed = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/changed`, events: ['task.cancelled'], secret: SECRET });
    const deleted = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/deleted`, events: ['task.cancelled'], secret: SECRET });
    const stack = await startStack(pg, nats, { maxAttempts: 8, backoffMs: [300], allowPrivateNetworks: true, endpointsCacheMs: 0 });
    const id = await submit(pg, null);
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length >= 2, { what: 'both endpoints tried once' });
    await updateEndpoint(pg.db.pool, { tenantId: 'd', id: changed.id, events: ['task.failed'] });
    await deleteEndpoint(pg.db.pool, 'd', deleted.id);
    const last = (endpointId: string) => async () => (await listDeliveries(pg.db.pool, id)).filter((r) => r.endpointId === endpointId).at(-1);
    await waitFor(async () => (await last(changed.id)())?.givenUp && (await last(deleted.id)())?.givenUp, { timeoutMs: 20_000, what: 'both given up' });
    await stack.stop();
    server.close();
    expect(await last(changed.id)()).toMatchObject({ ok: false, givenUp: true, error: 'given up: the endpoint no longer subscribes to task.cancelled', type: 'task.cancelled' });
    expect(await last(deleted.id)()).toMatchObject({ ok: false, givenUp: true, error: 'given up: the endpoint was deleted', type: 'task.cancelled' });
    // Nothing after the give-up.
    const rows = await listDeliveries(pg.db.pool, id);
    expect(rows.filter((r) => r.endpointId === changed.id).at(-1)?.attempt).toBe(rows.filter((r) => r.endpointId === changed.id).length);
  });
});

describe('notifier and a tenant\'s endpoints', () => {
  test('every task of the tenant is delivered to its endpoints, signed once per valid secret (a rotation: old and new); other tenants\' are not', async ({ pg, nats }) => {
    const got: { endpoint: string; type: string; headers: { id: string; timestamp: string; signature: string }; body: string }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push({ endpoint: req.url ?? '', type: JSON.parse(body).type, headers: { id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']), signature: String(req.headers['webhook-signature']) }, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const OLD = 'whsec_T2xkT2xkT2xkT2xkT2xkT2xkT2xkT2xkT2xk';
    const NEW = 'whsec_TmV3TmV3TmV3TmV3TmV3TmV3TmV3TmV3TmV3';
    const rotating = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/rotating`, events: ['task.cancelled', 'task.running'], secret: OLD });
    await rotateEndpointSecret(pg.db.pool, { tenantId: 'd', id: rotating.id, secret: NEW, overlapMs: 3_600_000 });
    await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'someone-else', url: `${base}/other`, events: ['task.cancelled'], secret: OLD });
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, endpointsCacheMs: 0 });
    const id = await submit(pg, null); // no webhook of its own
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 1, { what: 'the endpoint delivery' });
    await stack.stop();
    server.close();
    expect(got.map((g) => [g.endpoint, g.type])).toEqual([['/rotating', 'task.cancelled']]);
    const [hit] = got;
    expect(hit!.headers.signature.split(' ')).toHaveLength(2);
    expect(verify(NEW, hit!.headers, hit!.body)).toBe(true);
    expect(verify(OLD, hit!.headers, hit!.body)).toBe(true);
    expect(verify(SECRET, hit!.headers, hit!.body)).toBe(false); // not the notifier's own secret
    expect((await listDeliveries(pg.db.pool, id)).map((r) => [r.endpointId, r.ok])).toEqual([[rotating.id, true]]);
  });
});

describe("notifier and a tenant's key for its tasks' own webhooks", () => {
  test("a task's own webhook is signed with its tenant's key (and the deployment's secret while the move lasts), a rotated key beside the previous one, redeliveries too; a tenant without a key: the deployment's secret", async ({ pg, nats }) => {
    const hooks = await receiver();
    const KEY_D = 'whsec_S2V5RGtleURrZXlEa2V5RGtleURrZXlEa2V5';
    const KEY_E = 'whsec_S2V5RWtleUVrZXlFa2V5RWtleUVrZXlFa2V5';
    const KEY_E2 = 'whsec_TmV3RW5ld0VuZXdFbmV3RW5ld0VuZXdFbmV3';
    await createTaskWebhookSecret(pg.db.pool, { tenantId: 'd', secret: KEY_D, deploymentOverlapMs: 3_600_000 });
    await createTaskWebhookSecret(pg.db.pool, { tenantId: 'e', secret: KEY_E, deploymentOverlapMs: 0 });
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true, redeliverEveryMs: 50, endpointsCacheMs: 0 });
    const hook = { url: hooks.url, events: ['task.cancelled'] };
    const [d, e, f] = [await submit(pg, hook, 'd'), await submit(pg, hook, 'e'), await submit(pg, hook, 'f')];
    for (const id of [d, e, f]) await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(() => hooks.received.length === 3, { what: 'the three webhooks' });
    const signedWith = (taskId: string, n = 0) => {
      const got = hooks.received.filter((r) => r.body.data.task.id === taskId)[n]!;
      return { count: got.headers.signature.split(' ').length, verifies: (secret: string) => verify(secret, got.headers, got.raw) };
    };
    // d is moving over: both verify. e has moved: its key alone (the deployment's secret no more). f has no key.
    expect(signedWith(d).count).toBe(2);
    expect([signedWith(d).verifies(KEY_D), signedWith(d).verifies(SECRET), signedWith(d).verifies(KEY_E)]).toEqual([true, true, false]);
    expect(signedWith(e).count).toBe(1);
    expect([signedWith(e).verifies(KEY_E), signedWith(e).verifies(SECRET)]).toEqual([true, false]);
    expect([signedWith(f).count, signedWith(f).verifies(SECRET)]).toEqual([1, true]);

    // e rotates; its delivery sent again is signed with the new key and the previous one (the overlap).
    await rotateTaskWebhookSecret(pg.db.pool, { tenantId: 'e', secret: KEY_E2, overlapMs: 3_600_000 });
    // (An attempt is recorded once its answer is in: after the receiver has it.)
    await waitFor(async () => (await listDeliveries(pg.db.pool, e)).length === 1, { what: "e's delivery recorded" });
    const [delivered] = await listDeliveries(pg.db.pool, e);
    await requestRedelivery(pg.db.pool, { taskId: e, deliveryId: delivered!.id, requestedBy: 'u' });
    await waitFor(() => hooks.received.length === 4, { what: 'the redelivery' });
    await stack.stop();
    hooks.close();
    expect(signedWith(e, 1).count).toBe(2);
    expect([signedWith(e, 1).verifies(KEY_E2), signedWith(e, 1).verifies(KEY_E), signedWith(e, 1).verifies(SECRET)]).toEqual([true, true, false]);
  });
});

describe('notifier and several targets of one event', () => {
  test("each target keeps its own course: a 410 is not sent again while another fails, the retry waits as long as the most patient receiver asked, the attempts are numbered per target and the last says it was given up; an endpoint made after the event never gets it", async ({ pg, nats }) => {
    const got: { path: string; at: number }[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        got.push({ path, at: Date.now() });
        if (path === '/gone') res.writeHead(410).end();
        else if (path === '/later') res.writeHead(503, { 'retry-after': '2' }).end();
        else res.writeHead(500).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const gone = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/gone`, events: ['task.cancelled'], secret: SECRET });
    const later = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/later`, events: ['task.cancelled'], secret: SECRET });
    // The schedule's first wait is 50 ms; the receiver at /later asks for 2 s (within the schedule's longest, 3 s).
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50, 3000], allowPrivateNetworks: true, endpointsCacheMs: 0 });
    const id = await submit(pg, { url: `${base}/fail`, events: ['task.cancelled'] });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(() => got.length >= 3, { what: 'the first attempt to each target' });
    const late = await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${base}/late`, events: ['task.cancelled'], secret: SECRET });
    // Made well after the event (past the clocks' tolerance, CLOCK_TOLERANCE_MS): as if minutes later.
    await pg.db.pool.query(`update webhook_endpoints set created_at = created_at + interval '1 minute' where id = $1`, [late.id]);
    // Given up at the attempts the ledger counts (the bus allows more, for deliveries cut short by a dying notifier): nothing dead-lettered.
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).filter((r) => r.givenUp && r.statusCode !== 410).length === 2, { timeoutMs: 30_000, what: 'the message given up after its attempts' });
    await stack.stop();
    server.close();

    const rows = await listDeliveries(pg.db.pool, id);
    const of = (endpointId: string | null) => rows.filter((r) => r.endpointId === endpointId).map((r) => [r.attempt, r.statusCode, r.givenUp]);
    expect(of(gone.id)).toEqual([[1, 410, true]]);
    expect(of(null)).toEqual([[1, 500, false], [2, 500, false], [3, 500, true]]);
    expect(of(later.id)).toEqual([[1, 503, false], [2, 503, false], [3, 503, true]]);
    expect(of(late.id)).toEqual([]);
    expect(got.filter((g) => g.path === '/gone' || g.path === '/late').map((g) => g.path)).toEqual(['/gone']);
    // The first retry came no sooner than /later asked, for every target (the own webhook's schedule said 50 ms).
    const own = got.filter((g) => g.path === '/fail');
    expect(own[1]!.at - own[0]!.at).toBeGreaterThanOrEqual(1900);
  });
});

describe('notifier and relay: only what the notifier serves reaches it', () => {
  test('the transitions of a task with no targets never reach the notifier; a tenant\'s first endpoint, added while both run, gets the very next task\'s messages', async ({ pg, nats }) => {
    const hooks = await receiver();
    // As the orchestrator wires it; a refresh period of an hour: what applies the new endpoint is Postgres' announcement.
    const audience = new NotifierAudience({ tenantsWithEndpoints, channel: WEBHOOK_ENDPOINTS_CHANNEL, refreshMs: 3_600_000 });
    const stack = await startStack(pg, nats, { maxAttempts: 3, backoffMs: [50], allowPrivateNetworks: true }, audience); // the notifier's endpoint cache at its default, 5 s
    const notifierDelivered = async (): Promise<number> => (await (await jetstreamManager(nats.nc)).consumers.info(stack.names.eventsStream, stack.names.consumers.notifier)).delivered.consumer_seq;
    const quiet = await submit(pg, null);
    await handleCommand(pg.store, quiet, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    // A task with a webhook of its own: the notifier looks up tenant d's endpoints (none) while delivering it.
    const own = await submit(pg, { url: `${hooks.url}?own`, events: ['task.cancelled'] });
    await handleCommand(pg.store, own, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(() => hooks.received.length === 1, { what: 'the task\'s own webhook' });
    expect(await notifierDelivered()).toBe(2); // own's TaskSubmitted and TaskCancelled; nothing of the quiet task's
    await createEndpoint(pg.db.pool, { id: randomUUID(), tenantId: 'd', url: `${hooks.url}?tenant`, events: ['task.cancelled'], secret: SECRET });
    const next = await submit(pg, null);
    await handleCommand(pg.store, next, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(() => hooks.received.length === 2, { what: 'the tenant endpoint\'s delivery of the next task' });
    await stack.stop();
    hooks.close();
    expect(hooks.received[1]?.body).toMatchObject({ type: 'task.cancelled', data: { task: { id: next, status: 'cancelled' } } });
  });
});

describe('notifier egress guard', () => {
  test('a webhook to a private address is refused and the refusal recorded, unless allowed', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats, { maxAttempts: 2, backoffMs: [20], allowPrivateNetworks: false });
    const id = await submit(pg, { url: 'http://169.254.169.254/latest/meta-data', events: ['task.cancelled'] });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).some((r) => r.givenUp), { what: 'the delivery given up' });
    await stack.stop();
    const rows = (await pg.db.pool.query('select ok, status_code, error from webhook_deliveries')).rows;
    expect(rows).toHaveLength(2);
    expect(rows.every((r) => !r.ok && r.status_code === null && /non-public address/.test(r.error))).toBe(true);
  });
});

describe('notifier and credentials in a webhook URL', () => {
  test('a URL with user:pass@ (registered before the gateway refused them) is never stored or logged with them', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats, { maxAttempts: 1, backoffMs: [20], allowPrivateNetworks: false });
    const id = await submit(pg, { url: 'http://user:s3cret@10.0.0.7/hook', events: ['task.cancelled'] });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await pg.db.pool.query('select count(*)::int as n from webhook_deliveries')).rows[0].n === 1, { what: 'the refused delivery recorded' });
    await stack.stop();
    const [row] = (await pg.db.pool.query('select url, error from webhook_deliveries')).rows;
    expect(row).toEqual({ url: 'http://10.0.0.7/hook', error: 'Request cannot be constructed from a URL that includes credentials: http://10.0.0.7/hook' });
  });
});
