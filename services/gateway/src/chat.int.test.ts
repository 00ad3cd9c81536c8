import { randomUUID } from 'node:crypto';
import { AnthropicModel, OfflineChatModel, type ModelRequest, type StreamingModel } from '@baton/agents';
import { parseSse, toChatStreamEvent, type ChatMessageView, type ChatStreamEvent, type ChatView } from '@baton/api';
import { recordChat } from '@baton/event-store';
import { fakeMessagesApi, stackTest as test, waitFor } from '@baton/testing';
import type { FastifyInstance } from 'fastify';
import { describe, expect } from 'vitest';
import { testGateway } from './test-gateway.ts';

/** The typed events of a whole POST /v1/chat response. */
function events(body: string): ChatStreamEvent[] {
  const { frames, rest } = parseSse(body);
  expect(rest).toBe('');
  return frames.map(toChatStreamEvent).filter((e): e is ChatStreamEvent => e !== null);
}

const chat = (app: FastifyInstance, payload: object, headers: Record<string, string> = {}) => app.inject({ method: 'POST', url: '/v1/chat', payload, headers });
const getChat = async (app: FastifyInstance, id: string, headers: Record<string, string> = {}): Promise<ChatView> => (await app.inject({ method: 'GET', url: `/v1/chats/${id}`, headers })).json();

/** The offline chat model, keeping every request it was sent. */
function recording(): StreamingModel & { requests: ModelRequest[] } {
  const offline = new OfflineChatModel();
  const requests: ModelRequest[] = [];
  return { name: 'recording', requests, stream: (req, onText) => (requests.push(req), offline.stream(req, onText)) };
}

const count = async (pg: { db: { pool: { query: (q: string) => Promise<{ rows: { n: number }[] }> } } }, table: string) => (await pg.db.pool.query(`select count(*)::int as n from ${table}`)).rows[0]?.n;

describe('POST /v1/chat', () => {
  test('a new conversation streams chat, the reply word by word, then the recorded reply; GET /v1/chats/:id shows it; the next message continues it', async ({ pg, nats }) => {
    const model = recording();
    const app = await testGateway(pg, nats, { chatModel: model });
    const res = await chat(app, { message: 'What is event sourcing?' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const evs = events(res.body);
    expect(evs[0]?.event).toBe('chat');
    expect(evs[evs.length - 1]?.event).toBe('message');
    const deltas = evs.filter((e) => e.event === 'delta');
    expect(deltas.length).toBeGreaterThan(5);
    expect(evs.slice(1, -1).every((e) => e.event === 'delta')).toBe(true);
    const start = evs[0]!.data as { chatId: string; team: string; created: boolean; message: ChatMessageView };
    expect(start).toMatchObject({ team: 'research', created: true, message: { role: 'user', text: 'What is event sourcing?', author: 'anonymous', model: null, usage: null } });
    expect(res.headers['x-chat-id']).toBe(start.chatId);
    const reply = evs[evs.length - 1]!.data as ChatMessageView;
    expect(reply).toMatchObject({ role: 'assistant', model: 'offline', offline: true, inReplyTo: start.message.id, stopReason: 'end_turn', error: null });
    expect(reply.text).toMatch(/^\[offline model\] /);
    expect(reply.text).toContain('What is event sourcing?');
    expect(deltas.map((e) => (e.data as { text: string }).text).join('')).toBe(reply.text);
    expect(reply.usage?.outputTokens).toBeGreaterThan(0);

    const view = await getChat(app, start.chatId);
    expect(view).toMatchObject({ id: start.chatId, team: 'research', version: 3, tasks: [] });
    expect(view.messages).toEqual([start.message, reply]);
    expect(Date.parse(view.messages[0]!.createdAt)).toBeLessThanOrEqual(Date.parse(view.messages[1]!.createdAt));
    expect(view.usage.outputTokens).toBe(reply.usage?.outputTokens);

    // Continued: the model reads the whole conversation.
    const again = events((await chat(app, { chatId: start.chatId, message: 'And how does it make runs durable?' })).body);
    expect(again[0]).toMatchObject({ event: 'chat', data: { chatId: start.chatId, created: false } });
    expect(again[again.length - 1]?.event).toBe('message');
    expect(model.requests[1]?.messages).toEqual([
      { role: 'user', content: 'What is event sourcing?' },
      { role: 'assistant', content: [{ type: 'text', text: reply.text }] },
      { role: 'user', content: 'And how does it make runs durable?' },
    ]);
    expect(model.requests[1]?.system).toMatch(/'research' team/);
    expect((await getChat(app, start.chatId)).messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    const list = (await app.inject({ method: 'GET', url: '/v1/chats' })).json();
    expect(list.items).toEqual([expect.objectContaining({ id: start.chatId, team: 'research', title: 'What is event sourcing?', messages: 4, tasks: 0, version: 5 })]);
    // Chats are not tasks: nothing in the task log, nothing in the task list.
    expect(await count(pg, 'events')).toBe(0);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks' })).json().items).toEqual([]);
  });

  test('bad input is a 400 naming the field, and nothing is recorded', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const first = events((await chat(app, { message: 'hello there friend' })).body)[0]!.data as { chatId: string };
    const before = await count(pg, 'chat_events');
    const cases: [unknown, RegExp][] = [
      [{}, /body\.message/],
      [{ message: '   ' }, /body\.message: must not be empty/],
      [{ message: 'x'.repeat(10_001) }, /body\.message: must be at most 10000 characters/],
      [{ message: 'x', chatId: 'nope' }, /body\.chatId: must be a chat id/],
      [{ message: 'x', team: 'nope' }, /body\.team: unknown team 'nope'/],
      [{ message: 'x', team: 'constructor' }, /body\.team: unknown team 'constructor'/],
      [{ message: 'x', chatId: first.chatId, team: 'bench' }, /body\.team: this chat is with team 'research'/],
      [{ message: 'x', surprise: 1 }, /surprise/],
      [{ message: 'a\u0000b' }, /body\.message: contains a NUL/],
    ];
    for (const [payload, message] of cases) {
      const res = await chat(app, payload as object);
      expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
      expect(res.json().error.message).toMatch(message);
    }
    const badId = await app.inject({ method: 'GET', url: '/v1/chats/not-a-uuid' });
    expect(badId.statusCode).toBe(400);
    expect(badId.json().error.message).toMatch(/params\.id: must be a chat id/);
    expect((await app.inject({ method: 'GET', url: '/v1/chats?limit=0' })).json().error.message).toMatch(/^query\.limit: must be a whole number from 1 to /);
    const badTask = await app.inject({ method: 'POST', url: `/v1/chats/${first.chatId}/task`, payload: { requirePlanApproval: 'yes', prompt: 'x' } });
    expect(badTask.statusCode).toBe(400);
    expect(badTask.json().error.message).toMatch(/body\.requirePlanApproval/);
    expect(badTask.json().error.message).toMatch(/prompt/);
    expect((await app.inject({ method: 'POST', url: `/v1/chats/${first.chatId}/task`, payload: { team: 'nope' } })).json().error.message).toMatch(/body\.team: unknown team 'nope'/);
    expect(await count(pg, 'chat_events')).toBe(before);
    expect(await count(pg, 'events')).toBe(0);
  });

  test("tenancy: another tenant's chat is a 404 everywhere (read, continue, list, make a task)", async ({ pg, nats }) => {
    const app = await testGateway(pg, nats, { apiKeys: new Map([['key-of-tenant-a-0001', 'a'], ['key-of-tenant-b-0001', 'b']]) });
    const a = { authorization: 'Bearer key-of-tenant-a-0001' };
    const b = { authorization: 'Bearer key-of-tenant-b-0001' };
    expect((await chat(app, { message: 'hi' })).statusCode).toBe(401);
    const { chatId } = events((await chat(app, { message: 'mine, not yours' }, a)).body)[0]!.data as { chatId: string };
    expect((await app.inject({ method: 'GET', url: `/v1/chats/${chatId}`, headers: a })).statusCode).toBe(200);
    for (const res of [
      await app.inject({ method: 'GET', url: `/v1/chats/${chatId}`, headers: b }),
      await chat(app, { chatId, message: 'let me in' }, b),
      await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, headers: b }),
      await app.inject({ method: 'GET', url: `/v1/chats/${randomUUID()}`, headers: a }),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
    expect((await app.inject({ method: 'GET', url: '/v1/chats', headers: b })).json().items).toEqual([]);
    expect((await app.inject({ method: 'GET', url: '/v1/chats', headers: a })).json().items).toHaveLength(1);
    expect((await getChat(app, chatId, a)).messages).toHaveLength(2); // b's attempt recorded nothing
  });

  test('a model that fails mid-reply: error event, the failure recorded and none of its text; the next turn leaves it out', async ({ pg, nats }) => {
    const offline = new OfflineChatModel();
    let fail = true;
    const requests: ModelRequest[] = [];
    const flaky: StreamingModel = {
      name: 'flaky',
      stream: async (req, onText) => {
        requests.push(req);
        if (!fail) return offline.stream(req, onText);
        onText('Half of ');
        throw new Error('529 overloaded_error: Overloaded');
      },
    };
    const app = await testGateway(pg, nats, { chatModel: flaky });
    const evs = events((await chat(app, { message: 'first question' })).body);
    expect(evs.map((e) => e.event)).toEqual(['chat', 'delta', 'error']);
    const { chatId } = evs[0]!.data as { chatId: string };
    expect(evs[2]!.data).toMatchObject({ error: { code: 'model_error', message: '529 overloaded_error: Overloaded' }, message: { role: 'assistant', text: '', error: { code: 'model_error' } } });
    const view = await getChat(app, chatId);
    expect(view.messages.map((m) => [m.role, m.text, m.error?.code ?? null])).toEqual([['user', 'first question', null], ['assistant', '', 'model_error']]);
    fail = false;
    await chat(app, { chatId, message: 'second try' });
    // The failed reply is not part of the conversation: the two user messages are one turn.
    expect(requests[1]?.messages).toEqual([{ role: 'user', content: 'first question\n\nsecond try' }]);
  });

  test('a client that disconnects mid-stream (Claude through the SDK and a fake Messages API): the model call finishes and the whole reply is recorded, never a part', async ({ pg, nats }) => {
    const api = await fakeMessagesApi();
    const app = await testGateway(pg, nats, { chatModel: new AnthropicModel({ apiKey: 'sk-test', baseURL: api.baseURL, maxRetries: 0 }) });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      api.queue({ deltas: ['Event ', 'sourcing ', 'keeps ', 'every ', 'fact.'], holdAt: 2, usage: { input_tokens: 40, output_tokens: 12 } });
      const ctrl = new AbortController();
      const res = await fetch(`${base}/v1/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'Explain event sourcing' }), signal: ctrl.signal });
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const chatId = res.headers.get('x-chat-id') as string;
      const reader = res.body!.getReader();
      let text = '';
      const seen: ChatStreamEvent[] = [];
      while (seen.filter((e) => e.event === 'delta').length < 2) {
        const { value } = await reader.read();
        text += new TextDecoder().decode(value);
        const { frames, rest } = parseSse(text);
        text = rest;
        seen.push(...frames.map(toChatStreamEvent).filter((e): e is ChatStreamEvent => e !== null));
      }
      expect(seen.map((e) => e.event)).toEqual(['chat', 'delta', 'delta']);
      await waitFor(() => api.holding, { what: 'the fake to hold the stream' });
      // Mid-reply: the person's message is recorded, nothing of the reply is.
      expect((await getChat(app, chatId)).messages.map((m) => m.role)).toEqual(['user']);
      ctrl.abort(); // the client goes away
      await reader.cancel().catch(() => {});
      await waitFor(() => new Promise<boolean>((r) => app.server.getConnections((_, n) => r(n === 0))), { what: 'the gateway to see the client gone' });
      api.release(); // only now does the model go on
      const view = await waitFor(async () => {
        const v = await getChat(app, chatId);
        return v.messages.length === 2 ? v : null;
      }, { what: 'the reply to be recorded' });
      expect(view.messages[1]).toMatchObject({ role: 'assistant', text: 'Event sourcing keeps every fact.', model: 'claude-sonnet-4-5-20250929', offline: false, error: null, usage: { inputTokens: 40, outputTokens: 12, costUsd: (40 * 3 + 12 * 15) / 1e6 } });
      expect(api.served[0]).toMatchObject({ finished: true, closedByClient: false, sent: 5 });
      expect(api.served[0]?.body).toMatchObject({ stream: true, messages: [{ role: 'user', content: 'Explain event sourcing' }] });
    } finally {
      await app.close();
      await api.close();
    }
  });

  test('a message the model API refuses for good (a 400) fails as model_refused and is left out of what the model reads next; a failure worth asking again is joined to the next message', async ({ pg, nats }) => {
    const api = await fakeMessagesApi();
    const app = await testGateway(pg, nats, { chatModel: new AnthropicModel({ apiKey: 'sk-test', baseURL: api.baseURL, maxRetries: 0 }) });
    try {
      api.queue({ deltas: [], status: 400 });
      const first = events((await chat(app, { message: 'a message the model cannot take' })).body);
      const chatId = (first[0]!.data as { chatId: string }).chatId;
      expect(first[first.length - 1]).toMatchObject({ event: 'error', data: { error: { code: 'model_refused', message: expect.stringMatching(/refused the request: 400/) } } });
      api.queue({ deltas: ['Hello.'] });
      const second = events((await chat(app, { chatId, message: 'hello' })).body);
      expect(second[second.length - 1]?.event).toBe('message');
      expect(api.served[1]?.body.messages).toEqual([{ role: 'user', content: 'hello' }]);
      // A 500 (worth asking again): the unanswered message goes with the next one.
      api.queue({ deltas: [], status: 500 });
      const third = events((await chat(app, { chatId, message: 'are you there?' })).body);
      expect(third[third.length - 1]).toMatchObject({ event: 'error', data: { error: { code: 'model_error' } } });
      api.queue({ deltas: ['Yes.'] });
      events((await chat(app, { chatId, message: 'hello again' })).body);
      expect(api.served[3]?.body.messages).toEqual([
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: [{ type: 'text', text: 'Hello.' }] },
        { role: 'user', content: 'are you there?\n\nhello again' },
      ]);
      // A 401 (the deployment's key, not the message) is not the message's fault: model_error, and it stays.
      api.queue({ deltas: [], status: 401 });
      const denied = events((await chat(app, { chatId, message: 'keep this' })).body);
      expect(denied[denied.length - 1]).toMatchObject({ event: 'error', data: { error: { code: 'model_error', message: expect.stringMatching(/refused the request: 401/) } } });
      api.queue({ deltas: ['Kept.'] });
      events((await chat(app, { chatId, message: 'and this' })).body);
      expect(api.served[5]?.body.messages).toEqual(expect.arrayContaining([{ role: 'user', content: 'keep this\n\nand this' }]));
    } finally {
      await app.close();
      await api.close();
    }
  });

  test('at shutdown a reply still being written is abandoned and recorded as failed (closing waits for no model)', async ({ pg, nats }) => {
    let started = false;
    const endless: StreamingModel = {
      name: 'endless',
      stream: (req, onText) =>
        new Promise((_, reject) => {
          started = true;
          onText('Thinking');
          req.signal?.addEventListener('abort', () => reject(req.signal?.reason as Error), { once: true });
        }),
    };
    const app = await testGateway(pg, nats, { chatModel: endless });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const res = await fetch(`${base}/v1/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'think forever' }) });
    const chatId = res.headers.get('x-chat-id') as string;
    const body = res.text();
    await waitFor(() => started, { what: 'the model call' });
    await app.close();
    const evs = events(await body);
    expect(evs.map((e) => e.event)).toEqual(['chat', 'delta', 'error']);
    expect(evs[2]?.data).toMatchObject({ error: { code: 'shutdown' }, message: { role: 'assistant', error: { code: 'shutdown' }, text: '' } });
    const rows = (await pg.db.pool.query(`select type from chat_events where chat_id = $1 order by version`, [chatId])).rows.map((r: { type: string }) => r.type);
    expect(rows).toEqual(['ChatStarted', 'UserMessageRecorded', 'AssistantReplyFailed']);
  });
});

describe('POST /v1/chats/:id/task (action mode)', () => {
  test('turns the conversation into a task: the last message is the request, the conversation its context; the chat records the task and the task names the chat', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const { chatId } = events((await chat(app, { message: 'I am curious about NATS JetStream' })).body)[0]!.data as { chatId: string };
    await chat(app, { chatId, message: 'Research how JetStream stores messages and write a short report' });
    const res = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: false, budget: { usd: 2 } } });
    expect(res.statusCode).toBe(201);
    const task = res.json();
    expect(task).toMatchObject({ status: 'pending', team: 'research', requirePlanApproval: false, metadata: { chatId }, budget: { limit: { usd: 2, tokens: null } } });
    const prompt = task.prompt as string;
    expect(prompt.startsWith('Research how JetStream stores messages and write a short report\n\n---\n')).toBe(true);
    expect(prompt).toContain(`This task was started from a chat (${chatId})`);
    expect(prompt).toContain('User: I am curious about NATS JetStream');
    expect(prompt).toMatch(/Assistant: \[offline model\] /);
    expect(prompt).toContain('User: [the request above]');
    expect(prompt).not.toMatch(/left out/);
    // The task is a task like any other: in the log (naming the chat) and the list.
    const submitted = (await pg.db.pool.query(`select data, metadata from events where task_id = $1 and type = 'TaskSubmitted'`, [task.id])).rows;
    expect(submitted).toEqual([expect.objectContaining({ data: expect.objectContaining({ prompt, metadata: { chatId } }), metadata: expect.objectContaining({ chatId, actor: 'anonymous' }) })]);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks' })).json().items.map((t: { id: string }) => t.id)).toEqual([task.id]);
    const view = await getChat(app, chatId);
    expect(view.tasks).toEqual([{ taskId: task.id, team: 'research', afterMessageId: view.messages[3]!.id, leftOut: 0, createdAt: expect.any(String) }]);

    // The same conversation again (a double click): the same task; other settings: 409.
    const again = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: false, budget: { usd: 2 } } });
    expect(again.statusCode).toBe(201);
    expect(again.json().id).toBe(task.id);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const other = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: true } });
    expect(other.statusCode).toBe(409);
    expect(other.json().error).toMatchObject({ code: 'chat_task_exists', details: { taskId: task.id } });
    expect((await getChat(app, chatId)).tasks).toHaveLength(1);
    // After another message, another task (no body: the defaults, the chat's team).
    await chat(app, { chatId, message: 'Now compare it with Kafka' });
    const next = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task` });
    expect(next.statusCode).toBe(201);
    expect(next.json()).toMatchObject({ requirePlanApproval: true, team: 'research' });
    expect(next.json().id).not.toBe(task.id);
    expect(next.json().prompt).toMatch(/^Now compare it with Kafka\n/);
    expect((await getChat(app, chatId)).tasks.map((t) => t.taskId)).toEqual([task.id, next.json().id]);
  });

  test('one task per request: started before the reply to it landed, asked again after, it is the same task (replayed), not a second one', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const chatId = randomUUID();
    await recordChat(pg.db.pool, chatId, (_s, newId) => [
      { id: newId(), type: 'ChatStarted', data: { tenantId: 'default', team: 'research', startedBy: 'test' } },
      { id: newId(), type: 'UserMessageRecorded', data: { text: 'Research how JetStream stores messages', author: 'test' } },
    ]);
    // The reply is still being written when the person starts the task.
    const before = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: false } });
    expect(before.statusCode).toBe(201);
    const { state } = await recordChat(pg.db.pool, chatId, (s, newId) => [
      { id: newId(), type: 'AssistantReplyRecorded', data: { inReplyTo: s.messages[0]!.id, text: 'Sure, I can help.', model: 'offline', offline: true, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, stopReason: 'end_turn', durationMs: 1 } },
    ]);
    expect(state.messages).toHaveLength(2);
    const after = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: false } });
    expect(after.statusCode).toBe(201);
    expect(after.json().id).toBe(before.json().id);
    expect(after.headers['idempotent-replayed']).toBe('true');
    const other = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: true } });
    expect(other.statusCode).toBe(409);
    expect(other.json().error).toMatchObject({ code: 'chat_task_exists', details: { taskId: before.json().id } });
    expect((await getChat(app, chatId)).tasks.map((t) => t.taskId)).toEqual([before.json().id]);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks' })).json().items).toHaveLength(1);
  });

  test("a chat whose team is no longer configured: its task without a team is a 409 team_unavailable saying to name one (not a 400 on a field never sent); with a team, it starts", async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const chatId = randomUUID();
    await recordChat(pg.db.pool, chatId, (_s, newId) => [
      { id: newId(), type: 'ChatStarted', data: { tenantId: 'default', team: 'retired-team', startedBy: 'test' } },
      { id: newId(), type: 'UserMessageRecorded', data: { text: 'Research NATS', author: 'test' } },
    ]);
    const res = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: {} });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'team_unavailable', message: expect.stringMatching(/'retired-team' is no longer configured: name the task's team \(body\.team/) });
    const named = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { team: 'research', requirePlanApproval: false } });
    expect(named.statusCode).toBe(201);
    expect(named.json().team).toBe('research');
  });

  test('a long conversation: the oldest messages are left out to keep the prompt within 20000 characters, and the prompt says so', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const chatId = randomUUID();
    // Twelve long exchanges, recorded directly (the model's replies are not what this is about).
    await recordChat(pg.db.pool, chatId, (_s, newId) => [{ id: newId(), type: 'ChatStarted', data: { tenantId: 'default', team: 'research', startedBy: 'test' } }]);
    for (let i = 1; i <= 12; i++) {
      const { state } = await recordChat(pg.db.pool, chatId, (_s, newId) => [{ id: newId(), type: 'UserMessageRecorded', data: { text: `question ${i} ${'q'.repeat(1500)}`, author: 'test' } }]);
      const asked = state.messages[state.messages.length - 1]!.id;
      await recordChat(pg.db.pool, chatId, (_s, newId) => [{ id: newId(), type: 'AssistantReplyRecorded', data: { inReplyTo: asked, text: `answer ${i} ${'a'.repeat(1500)}`, model: 'offline', offline: true, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, stopReason: 'end_turn', durationMs: 1 } }]);
    }
    const res = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { requirePlanApproval: false } });
    expect(res.statusCode).toBe(201);
    const prompt = res.json().prompt as string;
    expect(prompt.length).toBeLessThanOrEqual(20_000);
    expect(prompt.startsWith('question 12 ')).toBe(true);
    expect(prompt).toMatch(/The \d+ oldest messages are left out to keep this prompt within 20000 characters\./);
    expect(prompt).not.toContain('question 1 ');
    expect(prompt).toContain('Assistant: answer 12 ');
    const leftOut = (await getChat(app, chatId)).tasks[0]!.leftOut;
    expect(leftOut).toBeGreaterThan(0);
    expect(prompt).toContain(`The ${leftOut} oldest messages`);
  });
});
