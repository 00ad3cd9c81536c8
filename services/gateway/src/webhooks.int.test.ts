import { randomUUID } from 'node:crypto';
import type { Command } from '@baton/domain';
import { handleCommand, loadTask } from '@baton/event-store';
import { mailIds } from '@baton/mail';
import { claimMail, recordDelivery, settleMail } from '@baton/storage';
import { stackTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { testGateway as gateway } from './test-gateway.ts';

const a = { authorization: 'Bearer key-of-tenant-a-0001' };
const b = { authorization: 'Bearer key-of-tenant-b-0001' };
const apiKeys = new Map([['key-of-tenant-a-0001', 'a'], ['key-of-tenant-b-0001', 'b']]);

describe('webhook subscriptions of a task', () => {
  test('every task.* and agent.* type is accepted; an unknown one is refused naming the field', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const events = ['task.running', 'task.awaiting_input', 'task.completed', 'task.failed', 'task.cancelled', 'agent.started', 'agent.awaiting_input', 'agent.completed', 'agent.failed', 'event.SubagentStarted'];
    const ok = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', webhook: { url: 'https://hooks.example.com/x', events } } });
    expect(ok.statusCode).toBe(201);
    for (const bad of ['agent.running', 'task.pending', 'agents.started']) {
      const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', webhook: { url: 'https://hooks.example.com/x', events: ['task.running', bad] } } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toMatch(/body\.webhook\.events\.1/);
    }
    // An event type that does not exist, or an agent's steps (never on the bus): refused, saying why, rather than accepted and never sent.
    const refused = async (type: string): Promise<string> => {
      const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', webhook: { url: 'https://hooks.example.com/x', events: [type] } } });
      expect(res.statusCode).toBe(400);
      return res.json().error.message as string;
    };
    expect(await refused('event.ModelTurnRecorded')).toMatch(/body\.webhook\.events\.0: an agent's steps \(ModelTurnRecorded, ToolResultsRecorded, ModelUnavailable, AgentReminded\) make no webhook .*GET \/v1\/tasks\/:id\/events/);
    expect(await refused('event.ToolResultsRecorded')).toMatch(/make no webhook/);
    expect(await refused('event.TaskExploded')).toMatch(/body\.webhook\.events\.0: unknown event type 'TaskExploded'; known: TaskSubmitted, /);
    expect(await (async () => {
      const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', webhook: { url: `https://hooks.example.com/${'a'.repeat(2100)}` } } });
      expect(res.statusCode).toBe(400);
      return res.json().error.message as string;
    })()).toMatch(/body\.webhook\.url: must be at most 2048 characters/);
    const endpoint = await app.inject({ method: 'POST', url: '/v1/webhooks', payload: { url: 'https://hooks.example.com/y', events: ['event.ModelTurnRecorded'] } });
    expect(endpoint.statusCode).toBe(400);
    expect(endpoint.json().error.message).toMatch(/body\.events\.0: an agent's steps/);
  });
});

describe('GET /v1/deliveries?givenUp=true', () => {
  test("what the notifiers gave up on across the tenant's tasks, newest first — each message's last attempt only, none a redelivery mended, no other tenant's; paged; a query without givenUp=true is a 400 saying where a task's attempts are", async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const submit = async (h: Record<string, string>) => (await app.inject({ method: 'POST', url: '/v1/tasks', headers: h, payload: { prompt: 'x' } })).json().id as string;
    const [one, two, theirs] = [await submit(a), await submit(a), await submit(b)];
    const attempt = (taskId: string, webhookId: string, n: number, o: { ok?: boolean; givenUp?: boolean; endpointId?: string } = {}) =>
      recordDelivery(pg.db.pool, { taskId, eventId: randomUUID(), webhookId, type: 'task.completed', url: 'https://hooks.example.com/x', attempt: n, statusCode: o.ok ? 200 : 500, ok: o.ok ?? false, error: o.ok ? null : 'HTTP 500', durationMs: 1, ...(o.givenUp ? { givenUp: true } : {}) });
    await attempt(one, 'msg_a', 1);
    await attempt(one, 'msg_a', 2, { givenUp: true }); // given up
    await attempt(one, 'msg_b', 1, { givenUp: true });
    await attempt(one, 'msg_b', 2, { ok: true }); // mended by a redelivery
    await attempt(two, 'msg_c', 1, { givenUp: true }); // given up, the newest
    await attempt(two, 'msg_d', 1); // failed, still being tried
    await attempt(theirs, 'msg_e', 1, { givenUp: true }); // another tenant's
    const listed = await app.inject({ method: 'GET', url: '/v1/deliveries?givenUp=true', headers: a });
    expect(listed.json().items.map((d: { taskId: string; webhookId: string; attempt: number; givenUp: boolean }) => [d.taskId, d.webhookId, d.attempt, d.givenUp])).toEqual([[two, 'msg_c', 1, true], [one, 'msg_a', 2, true]]);
    expect(listed.json().nextBefore).toBeNull();
    const first = (await app.inject({ method: 'GET', url: '/v1/deliveries?givenUp=true&limit=1', headers: a })).json();
    expect(first.items.map((d: { webhookId: string }) => d.webhookId)).toEqual(['msg_c']);
    const next = (await app.inject({ method: 'GET', url: `/v1/deliveries?givenUp=true&limit=1&before=${first.nextBefore}`, headers: a })).json();
    expect(next.items.map((d: { webhookId: string }) => d.webhookId)).toEqual(['msg_a']);
    const bad = await app.inject({ method: 'GET', url: '/v1/deliveries', headers: a });
    expect([bad.statusCode, bad.json().error.message]).toEqual([400, "query.givenUp: only givenUp=true is listed across tasks (a task's every attempt: GET /v1/tasks/:id/deliveries)"]);
  });
});

describe('POST /v1/tasks/:id/deliveries/:deliveryId/redeliver', () => {
  test('records a request (202) the notifier picks up; 404 for an unknown delivery or another tenant; 409 for a mail the task does not make; 400 for a bad id', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: a, payload: { prompt: 'x', webhook: { url: 'https://hooks.example.com/x', events: ['task.cancelled'] } } })).json().id as string;
    const eventId = randomUUID();
    const attempt = { taskId: id, eventId, webhookId: `msg_${eventId}_task_cancelled`, type: 'task.cancelled', url: 'https://hooks.example.com/x', attempt: 1, statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 3 };
    await recordDelivery(pg.db.pool, attempt);
    await recordDelivery(pg.db.pool, { ...attempt, channel: 'email', webhookId: 'mail_1', type: 'email.completed', url: 'mailto:ann@example.com' });
    const [hook, mail] = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/deliveries`, headers: a })).json().items as { id: string; redelivery: boolean }[];
    expect(hook).toMatchObject({ id: expect.stringMatching(/^\d+$/), redelivery: false });

    const res = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/${hook!.id}/redeliver`, headers: a });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ redeliveryId: expect.stringMatching(/^\d+$/), deliveryId: hook!.id, webhookId: attempt.webhookId, status: 'queued' });
    const { rows } = await pg.db.pool.query('select task_id, delivery_id::text, requested_by, done_at from webhook_redeliveries');
    expect(rows).toEqual([{ task_id: id, delivery_id: hook!.id, requested_by: expect.stringMatching(/@a$/), done_at: null }]);

    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/${hook!.id}/redeliver`, headers: b })).statusCode).toBe(404);
    const unknown = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/999999999/redeliver`, headers: a });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('not_found');
    const other = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: a, payload: { prompt: 'y' } })).json().id as string;
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${other}/deliveries/${hook!.id}/redeliver`, headers: a })).statusCode).toBe(404); // not this task's
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/${mail!.id}/redeliver`, headers: a })).json().error).toMatchObject({ code: 'mail_unknown', message: expect.stringMatching(/the task makes no such mail any more \(email\.completed\)/) });
    const bad = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/abc/redeliver`, headers: a });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/params\.deliveryId/);
    expect((await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries')).rows[0].n).toBe(1);
  });

  test("a notification mail: 202 once the notifiers have given up on it; 409 while they still try, once its request is decided, and for an agent's mail", async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: a, payload: { prompt: 'x', notify: { email: { to: ['ann@example.com'], on: ['awaiting_input'] } } } })).json().id as string;
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const run = (c: Command) => handleCommand(pg.store, id, c);
    await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
    await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }] });
    await run({ type: 'RequestApproval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'p', deadline: new Date(Date.now() + 600_000).toISOString(), onTimeout: 'reject' });
    const requested = (await loadTask(pg.store, id)).events.find((e) => e.type === 'ApprovalRequested')!;
    const key = { taskId: id, key: 'request:apr-1', recipient: 'ann@example.com' };
    const { deliveryId: webhookId } = mailIds(id, key.key, key.recipient, 'baton.example');
    await recordDelivery(pg.db.pool, { taskId: id, eventId: requested.id, webhookId, channel: 'email', type: 'email.awaiting_input', url: 'mailto:ann@example.com', attempt: 1, statusCode: 451, ok: false, error: '451 later', durationMs: 3 });
    await recordDelivery(pg.db.pool, { taskId: id, eventId: requested.id, webhookId: 'mail_outbox', channel: 'email', type: 'email.outbox', url: 'mailto:bob@example.com', attempt: 1, statusCode: 550, ok: false, error: '550 no', durationMs: 3 });
    const [mail, outbox] = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/deliveries`, headers: a })).json().items as { id: string }[];
    const redeliver = (deliveryId: string) => app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/${deliveryId}/redeliver`, headers: a });

    await claimMail(pg.db.pool, { ...key, messageId: '<m@x>', holder: 'n1', leaseMs: 60_000 });
    await settleMail(pg.db.pool, { ...key, holder: 'n1', state: 'retry', error: '451 later' });
    const trying = await redeliver(mail!.id);
    expect(trying.statusCode).toBe(409);
    expect(trying.json().error).toMatchObject({ code: 'mail_in_flight', message: expect.stringMatching(/still trying to send this mail \(attempt 1 so far\)/) });
    await claimMail(pg.db.pool, { ...key, messageId: '<m@x>', holder: 'n1', leaseMs: 60_000 });
    await settleMail(pg.db.pool, { ...key, holder: 'n1', state: 'failed', error: '451 later' });
    const queued = await redeliver(mail!.id);
    expect(queued.statusCode).toBe(202);
    expect(queued.json()).toMatchObject({ deliveryId: mail!.id, webhookId, status: 'queued' });

    const agents = await redeliver(outbox!.id);
    expect(agents.statusCode).toBe(409);
    expect(agents.json().error).toMatchObject({ code: 'agent_mail', message: expect.stringMatching(/an agent's mail \(send_email\) is not sent again/) });
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, headers: a, payload: { decision: 'approve' } })).statusCode).toBe(200);
    const closed = await redeliver(mail!.id);
    expect(closed.statusCode).toBe(409);
    expect(closed.json().error).toMatchObject({ code: 'request_closed', message: expect.stringMatching(/\(apr-1\) is no longer open/) });
    expect((await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries')).rows[0].n).toBe(1);
  });

  test('409 endpoint_deleted for a delivery to a tenant endpoint deleted since: nothing is queued', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const endpoint = (await app.inject({ method: 'POST', url: '/v1/webhooks', headers: a, payload: { url: 'https://hooks.example.com/a', events: ['task.cancelled'] } })).json() as { id: string };
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: a, payload: { prompt: 'x' } })).json().id as string;
    const eventId = randomUUID();
    await recordDelivery(pg.db.pool, { taskId: id, eventId, webhookId: `msg_${eventId}_task_cancelled`, type: 'task.cancelled', url: 'https://hooks.example.com/a', attempt: 1, statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 3, endpointId: endpoint.id });
    const [hook] = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/deliveries`, headers: a })).json().items as { id: string }[];
    expect((await app.inject({ method: 'DELETE', url: `/v1/webhooks/${endpoint.id}`, headers: a })).statusCode).toBe(204);
    const res = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/deliveries/${hook!.id}/redeliver`, headers: a });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'endpoint_deleted', message: expect.stringContaining(endpoint.id) });
    expect((await pg.db.pool.query('select count(*)::int as n from webhook_redeliveries')).rows[0].n).toBe(0);
  });
});

describe('/v1/webhooks (a tenant\'s endpoints)', () => {
  test('at most 20 endpoints per tenant, also when many are asked for at once; another tenant has its own 20', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const create = (h: Record<string, string>, n: number) => app.inject({ method: 'POST', url: '/v1/webhooks', headers: h, payload: { url: `https://hooks.example.com/${n}` } });
    const codes = (await Promise.all(Array.from({ length: 30 }, (_, n) => create(a, n)))).map((r) => r.statusCode);
    expect(codes.filter((c) => c === 201)).toHaveLength(20);
    expect(codes.filter((c) => c === 409)).toHaveLength(10);
    expect((await app.inject({ method: 'GET', url: '/v1/webhooks', headers: a })).json().items).toHaveLength(20);
    const refused = await create(a, 99);
    expect(refused.json().error).toMatchObject({ code: 'too_many_webhooks', message: 'a tenant has at most 20 webhook endpoints; delete one first' });
    expect((await create(b, 0)).statusCode).toBe(201);
  });

  test('create (the secret shown once), list without secrets, rotate (the previous secret kept for the overlap), delete; per tenant; bad input named', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const created = await app.inject({ method: 'POST', url: '/v1/webhooks', headers: a, payload: { url: 'https://hooks.example.com/a', events: ['task.running', 'agent.failed'] } });
    expect(created.statusCode).toBe(201);
    const hook = created.json();
    expect(hook).toEqual({ id: expect.any(String), url: 'https://hooks.example.com/a', events: ['task.running', 'agent.failed'], secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/=]{32}$/), createdAt: expect.any(String), rotatedAt: null, previousSecretExpiresAt: null });
    const defaults = (await app.inject({ method: 'POST', url: '/v1/webhooks', headers: a, payload: { url: 'https://hooks.example.com/b' } })).json();
    expect(defaults.events).toEqual(['task.completed', 'task.failed', 'task.cancelled', 'task.awaiting_input']);

    const listed = (await app.inject({ method: 'GET', url: '/v1/webhooks', headers: a })).json().items;
    expect(listed.map((e: { id: string }) => e.id)).toEqual([hook.id, defaults.id]);
    expect(JSON.stringify(listed)).not.toMatch(/whsec_/);
    expect((await app.inject({ method: 'GET', url: '/v1/webhooks', headers: b })).json().items).toEqual([]);

    // One endpoint, and a change to it: its id and secret stay (receivers keep verifying).
    expect((await app.inject({ method: 'GET', url: `/v1/webhooks/${hook.id}`, headers: a })).json()).toEqual(listed[0]);
    expect((await app.inject({ method: 'GET', url: `/v1/webhooks/${hook.id}`, headers: b })).statusCode).toBe(404);
    const moved = await app.inject({ method: 'PATCH', url: `/v1/webhooks/${hook.id}`, headers: a, payload: { url: 'https://hooks.example.com/moved' } });
    expect(moved.json()).toEqual({ ...listed[0], url: 'https://hooks.example.com/moved' });
    const retyped = await app.inject({ method: 'PATCH', url: `/v1/webhooks/${hook.id}`, headers: a, payload: { events: ['task.completed'] } });
    expect(retyped.json()).toMatchObject({ url: 'https://hooks.example.com/moved', events: ['task.completed'] });
    expect((await pg.db.pool.query('select secret from webhook_endpoints where id = $1', [hook.id])).rows[0].secret).toBe(hook.secret);
    const patchCases: [unknown, RegExp][] = [
      [{}, /give url, events or both/],
      [{ url: 'http://127.0.0.1/x' }, /^body\.url: /],
      [{ events: [] }, /^body\.events/],
      [{ events: ['task.completed', 'task.completed'] }, /body\.events\.1: 'task\.completed' is listed twice/],
      [{ url: 'https://hooks.example.com/x', secret: 'mine' }, /secret/],
    ];
    for (const [payload, message] of patchCases) {
      const res = await app.inject({ method: 'PATCH', url: `/v1/webhooks/${hook.id}`, headers: a, payload: payload as object });
      expect([res.statusCode, res.json().error.message], JSON.stringify(payload)).toEqual([400, expect.stringMatching(message)]);
    }
    expect((await app.inject({ method: 'PATCH', url: `/v1/webhooks/${hook.id}`, headers: b, payload: { events: ['task.failed'] } })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/v1/webhooks/${hook.id}`, headers: a })).json().events).toEqual(['task.completed']);

    const rotated = await app.inject({ method: 'POST', url: `/v1/webhooks/${hook.id}/rotate-secret`, headers: a, payload: { overlapSeconds: 3600 } });
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json().secret).not.toBe(hook.secret);
    const { rows } = await pg.db.pool.query('select secret, previous_secret, previous_expires_at > now() + interval \'59 minutes\' as overlap from webhook_endpoints where id = $1', [hook.id]);
    expect(rows).toEqual([{ secret: rotated.json().secret, previous_secret: hook.secret, overlap: true }]);
    expect((await app.inject({ method: 'POST', url: `/v1/webhooks/${hook.id}/rotate-secret`, headers: b })).statusCode).toBe(404);
    // Again within the overlap (a double click, two operators): refused — it would stop the previous secret at once — unless asked to.
    const twice = await app.inject({ method: 'POST', url: `/v1/webhooks/${hook.id}/rotate-secret`, headers: a, payload: { overlapSeconds: 3600 } });
    expect([twice.statusCode, twice.json().error.code]).toEqual([409, 'rotation_in_progress']);
    expect(twice.json().error.message).toMatch(/^the previous secret still signs until \d{4}-.*send dropPrevious: true \(the CLI.s --drop-previous\) to stop it now$/);
    expect((await pg.db.pool.query('select secret from webhook_endpoints where id = $1', [hook.id])).rows[0].secret).toBe(rotated.json().secret);
    const dropped = await app.inject({ method: 'POST', url: `/v1/webhooks/${hook.id}/rotate-secret`, headers: a, payload: { overlapSeconds: 60, dropPrevious: true } });
    expect(dropped.statusCode).toBe(200);
    expect((await pg.db.pool.query('select previous_secret from webhook_endpoints where id = $1', [hook.id])).rows[0].previous_secret).toBe(rotated.json().secret);

    expect((await app.inject({ method: 'DELETE', url: `/v1/webhooks/${hook.id}`, headers: b })).statusCode).toBe(404);
    expect((await app.inject({ method: 'DELETE', url: `/v1/webhooks/${hook.id}`, headers: a })).statusCode).toBe(204);
    expect((await app.inject({ method: 'DELETE', url: `/v1/webhooks/${hook.id}`, headers: a })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/v1/webhooks', headers: a })).json().items.map((e: { id: string }) => e.id)).toEqual([defaults.id]);

    const cases: [unknown, RegExp][] = [
      [{}, /body\.url/],
      [{ url: 'ftp://x' }, /body\.url/],
      [{ url: 'http://127.0.0.1/x' }, /body\.url/],
      [{ url: 'https://hooks.example.com/x', events: ['task.exploded'] }, /body\.events\.0/],
      [{ url: 'https://hooks.example.com/x', secret: 'mine' }, /secret/],
      [{ url: `https://hooks.example.com/${'a'.repeat(2100)}` }, /body\.url: must be at most 2048 characters/],
      [{ url: 'https://hooks.example.com/x', events: ['task.failed', 'task.completed', 'task.failed'] }, /body\.events\.2: 'task\.failed' is listed twice/],
    ];
    for (const [payload, field] of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/webhooks', headers: a, payload: payload as object });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.message).toMatch(field);
    }
    const badRotate = await app.inject({ method: 'POST', url: `/v1/webhooks/${defaults.id}/rotate-secret`, headers: a, payload: { overlapSeconds: -1 } });
    expect(badRotate.statusCode).toBe(400);
    expect(badRotate.json().error.message).toMatch(/body\.overlapSeconds/);
    expect((await app.inject({ method: 'DELETE', url: '/v1/webhooks/nope', headers: a })).json().error.message).toMatch(/params\.webhookId/);
  });
});

describe("a tenant's key for its tasks' own webhooks", () => {
  test("made once (the key shown once, the deployment's secret beside it for the overlap), shown without the key, rotated; per tenant; a second make, no key and bad input named", async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { apiKeys });
    const none = await app.inject({ method: 'GET', url: '/v1/task-webhook-secret', headers: a });
    expect([none.statusCode, none.json().error.code]).toEqual([404, 'not_found']);
    expect(none.json().error.message).toMatch(/signed with the deployment's WEBHOOK_SECRET; POST \/v1\/task-webhook-secret makes one/);
    expect((await app.inject({ method: 'POST', url: '/v1/task-webhook-secret/rotate', headers: a })).statusCode).toBe(404);

    const made = await app.inject({ method: 'POST', url: '/v1/task-webhook-secret', headers: a, payload: { overlapSeconds: 3600 } });
    expect(made.statusCode).toBe(201);
    const key = made.json();
    expect(key).toEqual({ secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/=]{32}$/), createdAt: expect.any(String), rotatedAt: null, previousSecretExpiresAt: null, deploymentSecretUntil: expect.any(String) });
    expect(Date.parse(key.deploymentSecretUntil) - Date.parse(key.createdAt)).toBeGreaterThan(3_590_000);
    const again = await app.inject({ method: 'POST', url: '/v1/task-webhook-secret', headers: a });
    expect([again.statusCode, again.json().error]).toEqual([409, { code: 'task_webhook_secret_exists', message: expect.stringMatching(/POST \/v1\/task-webhook-secret\/rotate replaces it/) }]);

    const shown = (await app.inject({ method: 'GET', url: '/v1/task-webhook-secret', headers: a })).json();
    const { secret: _, ...withoutKey } = key;
    expect(shown).toEqual(withoutKey);
    expect((await app.inject({ method: 'GET', url: '/v1/task-webhook-secret', headers: b })).statusCode).toBe(404);

    const rotated = await app.inject({ method: 'POST', url: '/v1/task-webhook-secret/rotate', headers: a, payload: { overlapSeconds: 60 } });
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json()).toEqual({ ...withoutKey, secret: expect.stringMatching(/^whsec_/), rotatedAt: expect.any(String), previousSecretExpiresAt: expect.any(String) });
    expect(rotated.json().secret).not.toBe(key.secret);
    const { rows } = await pg.db.pool.query('select tenant_id, secret, previous_secret from task_webhook_secrets');
    expect(rows).toEqual([{ tenant_id: 'a', secret: rotated.json().secret, previous_secret: key.secret }]);
    const twice = await app.inject({ method: 'POST', url: '/v1/task-webhook-secret/rotate', headers: a });
    expect([twice.statusCode, twice.json().error.code, twice.json().error.message]).toEqual([409, 'rotation_in_progress', expect.stringMatching(/^the previous key still signs until /)]);
    expect((await pg.db.pool.query('select previous_secret from task_webhook_secrets')).rows[0].previous_secret).toBe(key.secret);

    // Tenant b's own, with no overlap: the deployment's secret stops at once.
    const bKey = (await app.inject({ method: 'POST', url: '/v1/task-webhook-secret', headers: b, payload: { overlapSeconds: 0 } })).json();
    expect(Date.parse(bKey.deploymentSecretUntil)).toBeLessThanOrEqual(Date.parse(bKey.createdAt) + 1000);
    for (const [url, payload] of [['/v1/task-webhook-secret', { overlapSeconds: -1 }], ['/v1/task-webhook-secret', { dropPrevious: true }], ['/v1/task-webhook-secret/rotate', { overlapSeconds: 8 * 86_400 }], ['/v1/task-webhook-secret/rotate', { secret: 'mine' }]] as const) {
      const res = await app.inject({ method: 'POST', url, headers: a, payload });
      expect([res.statusCode, res.json().error.message], JSON.stringify(payload)).toEqual([400, expect.stringMatching(/body\.(overlapSeconds|secret|dropPrevious)|secret|dropPrevious/)]);
    }
  });
});
