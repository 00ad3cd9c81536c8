import type { ChatMessageView, ChatView } from '@baton/api';
import type { ChatSummaryView, DeliveryView, TaskSummary, TeamInfoView, WebhookEndpointView } from '@baton/client';
import { describe, expect, it } from 'vitest';
import { describeChat, describeConversation, describeDeliveries, describeDelivery, describeListItem, describeTaskWebhookSecret, describeTeam, describeWebhook, listing } from './views.ts';

describe('describeListItem', () => {
  const item: TaskSummary = { id: 't-1', status: 'awaiting_input', prompt: 'Compare\n  PostgreSQL and SQLite', team: 'research', createdAt: '2026-11-26T20:00:00.000Z', updatedAt: '2026-11-26T20:01:00.000Z', version: 9, pendingRequests: [], forkedFrom: null };
  it('one line: id, status, team, last change, prompt (whitespace folded, long ones cut)', () => {
    expect(describeListItem(item)).toBe('t-1  awaiting_input  research  2026-11-26T20:01:00.000Z  Compare PostgreSQL and SQLite');
    expect(describeListItem({ ...item, status: 'running', prompt: 'x'.repeat(200) })).toBe(`t-1  running         research  2026-11-26T20:01:00.000Z  ${'x'.repeat(79)}…`);
  });
  it('says how many requests are open and whose fork it is', () => {
    const open = [{ requestId: 'a' }, { requestId: 'b' }] as unknown as TaskSummary['pendingRequests'];
    expect(describeListItem({ ...item, pendingRequests: open, forkedFrom: { taskId: 't-0', atVersion: 4 } })).toMatch(/ \(2 open requests, fork of t-0 at v4\) /);
    expect(describeListItem({ ...item, pendingRequests: open.slice(1) })).toMatch(/ \(1 open request\) /);
  });
});

describe('describeWebhook', () => {
  const w: WebhookEndpointView = { id: 'w-1', url: 'https://hooks.example.com/baton', events: ['task.completed', 'task.failed'], createdAt: '2026-11-26T10:00:00.000Z', rotatedAt: null, previousSecretExpiresAt: null };
  it('id, URL, events, since when; a rotation and how long the previous secret still signs', () => {
    expect(describeWebhook(w)).toBe('w-1  https://hooks.example.com/baton  task.completed,task.failed  since 2026-11-26T10:00:00.000Z');
    expect(describeWebhook({ ...w, rotatedAt: '2026-11-26T11:00:00.000Z', previousSecretExpiresAt: '2026-11-27T11:00:00.000Z' })).toMatch(/rotated 2026-11-26T11:00:00.000Z \(the previous secret signs too until 2026-11-27T11:00:00.000Z\)$/);
  });
});

describe('describeTaskWebhookSecret', () => {
  it('since when, a rotation, and what signs beside the key while it still does (not once it has stopped)', () => {
    const now = Date.parse('2026-11-27T12:00:00.000Z');
    const k = { createdAt: '2026-11-26T10:00:00.000Z', rotatedAt: null, previousSecretExpiresAt: null, deploymentSecretUntil: '2026-11-27T10:00:00.000Z' };
    expect(describeTaskWebhookSecret(k, now)).toBe('key since 2026-11-26T10:00:00.000Z');
    expect(describeTaskWebhookSecret({ ...k, deploymentSecretUntil: '2026-11-28T10:00:00.000Z' }, now)).toBe("key since 2026-11-26T10:00:00.000Z (the deployment's secret signs too until 2026-11-28T10:00:00.000Z)");
    expect(describeTaskWebhookSecret({ ...k, rotatedAt: '2026-11-27T11:00:00.000Z', previousSecretExpiresAt: '2026-11-27T13:00:00.000Z' }, now)).toBe(
      'key since 2026-11-26T10:00:00.000Z, rotated 2026-11-27T11:00:00.000Z (the previous key signs too until 2026-11-27T13:00:00.000Z)',
    );
  });
});

describe('describeDelivery', () => {
  const d: DeliveryView = { id: '17', channel: 'webhook', endpointId: null, redelivery: false, webhookId: 'wh-1', eventId: 'e-1', type: 'task.completed', url: 'https://hooks.example.com/baton', attempt: 1, statusCode: 200, ok: true, error: null, durationMs: 12, givenUp: false, attemptedAt: '2026-11-26T12:00:00.000Z' };
  it('a delivered one: when, what, where, how', () => {
    expect(describeDelivery('t-1', d)).toBe('17  2026-11-26T12:00:00.000Z  webhook task.completed  → https://hooks.example.com/baton  attempt 1  ok 200 (12 ms)');
  });
  it("a failed webhook or notification mail: why, and the command that sends it again; an agent's mail never gets that command", () => {
    expect(describeDelivery('t-1', { ...d, ok: false, statusCode: 500, error: 'HTTP 500', attempt: 3, redelivery: true })).toBe('17  2026-11-26T12:00:00.000Z  webhook task.completed  → https://hooks.example.com/baton  attempt 3 (redelivery)  failed 500: HTTP 500 (12 ms)\n   → baton redeliver t-1 17');
    expect(describeDelivery('t-1', { ...d, ok: false, statusCode: null, error: null })).toMatch(/failed: no answer \(12 ms\)\n {3}\(the notifiers try again by themselves\)$/);
    expect(describeDelivery('t-1', { ...d, ok: false, statusCode: null, error: null, givenUp: true })).toMatch(/given up: no more attempts\n {3}→ baton redeliver t-1 17$/);
    expect(describeDelivery('t-1', { ...d, channel: 'email', type: 'email.outbox', url: 'mailto:a@example.com, b@example.com', statusCode: 250, error: 'refused: b@example.com (550 no such user)' })).toMatch(/ok 250 \(refused: b@example\.com \(550 no such user\)\) \(12 ms\)$/);
    // The last attempt the notifiers make says so: no retry is coming, only a person's.
    // A recipient the deployment does not mail: said, and no redeliver offered (it would be refused again).
    expect(describeDelivery('t-1', { ...d, channel: 'email', type: 'email.completed', url: 'mailto:eve@evil.example', ok: false, statusCode: null, error: "not sent: eve@evil.example: this deployment does not mail that address for tenant 'acme' (MAIL_ALLOWED_RECIPIENTS allows acme.example)", givenUp: true })).toMatch(/; a recipient this deployment does not mail \(MAIL_ALLOWED_RECIPIENTS\): not sent again$/);
    expect(describeDelivery('t-1', { ...d, ok: false, statusCode: 410, error: 'HTTP 410', givenUp: true })).toBe('17  2026-11-26T12:00:00.000Z  webhook task.completed  → https://hooks.example.com/baton  attempt 1  failed 410: HTTP 410 (12 ms); the receiver said 410 Gone: not tried again\n   → baton redeliver t-1 17');
    expect(describeDelivery('t-1', { ...d, channel: 'email', type: 'email.completed', url: 'mailto:ops@example.com', ok: false, statusCode: 550, error: 'mailbox full', givenUp: true })).toBe('17  2026-11-26T12:00:00.000Z  mail email.completed  → mailto:ops@example.com  attempt 1  failed 550: mailbox full (12 ms); refused for good: not tried again\n   → baton redeliver t-1 17');
    expect(describeDelivery('t-1', { ...d, channel: 'email', type: 'email.outbox', url: 'mailto:ops@example.com', ok: false, statusCode: null, error: 'connection refused' })).not.toMatch(/redeliver/);
    // An endpoint deleted since: nothing to send it to, and no redeliver offered (it would be a 409).
    for (const error of ['given up: the endpoint was deleted', 'not sent: the endpoint was deleted'])
      expect(describeDelivery('t-1', { ...d, endpointId: 'ep-1', ok: false, statusCode: null, error, givenUp: true })).toBe(`17  2026-11-26T12:00:00.000Z  webhook task.completed  → https://hooks.example.com/baton  attempt 1  failed: ${error} (12 ms); its endpoint was deleted: nothing to send it to`);
  });
  it('in a list, only the latest attempt of each message offers the command: not a failure a later attempt mended', () => {
    const fail = { ...d, ok: false, statusCode: 500, error: 'HTTP 500', givenUp: true };
    const lines = describeDeliveries('t-1', [
      { ...fail, id: '1' },
      { ...d, id: '2', attempt: 2 },
      { ...fail, id: '3', webhookId: 'wh-2' },
      { ...fail, id: '4', webhookId: 'wh-2', attempt: 2 },
      { ...fail, id: '5', endpointId: 'ep-1' },
    ]);
    expect(lines.map((l) => l.includes('baton redeliver'))).toEqual([false, false, false, true, true]);
    expect(lines[3]).toMatch(/→ baton redeliver t-1 4$/);
  });
});

describe('describeTeam', () => {
  it('the lead with its tools, whom it delegates to and who reviews; each agent with its model, tools and file scope; the approval rules', () => {
    const t: TeamInfoView = {
      id: 'engineering',
      description: 'A planner, engineers and a reviewer',
      lead: { id: 'planner', name: 'Planner', model: 'claude-x', tools: ['Task'], maxTurns: 10, delegatesTo: ['engineer'], reviewAgent: 'reviewer', reviewRounds: 1 },
      agents: [{ id: 'engineer', name: 'Engineer', model: 'claude-y', tools: ['read_file', 'write_file'], maxTurns: 10, fileScope: { allowed: ['src/**'], blocked: ['secrets/**'] }, testCommand: 'npx vitest run' }, { id: 'idle', name: 'Idle', model: 'claude-z', tools: [], maxTurns: 10 }],
      approvals: [{ agent: 'engineer', tool: 'write_file', require: 'always', onTimeout: 'reject' }, { tool: 'send_email', require: 'never', onTimeout: 'reject' }],
    };
    expect(describeTeam(t)).toBe(
      [
        'engineering — A planner, engineers and a reviewer',
        '  lead planner (claude-x, 10 turns): Task; delegates to engineer; reviewed by reviewer',
        '  agent engineer (claude-y, 10 turns): read_file, write_file; writes src/**, never secrets/**; tests: npx vitest run',
        '  agent idle (claude-z, 10 turns): no tools',
        '  approval: engineer · write_file → always, at the deadline reject',
        '  approval: any agent · send_email → never, at the deadline reject',
      ].join('\n'),
    );
  });
});

describe('describeChat', () => {
  it('id, team, last activity, messages and the tasks made of it, title', () => {
    const c: ChatSummaryView = { id: 'c-1', team: 'research', title: 'Compare PostgreSQL and SQLite', createdAt: '2026-11-26T10:00:00.000Z', updatedAt: '2026-11-26T10:05:00.000Z', version: 4, messages: 4, tasks: 0 };
    expect(describeChat(c)).toBe('c-1  research  2026-11-26T10:05:00.000Z  4 messages  Compare PostgreSQL and SQLite');
    expect(describeChat({ ...c, tasks: 1 })).toMatch(/ {2}4 messages, 1 task {2}/);
    expect(describeChat({ ...c, tasks: 2 })).toMatch(/ {2}4 messages, 2 tasks {2}/);
    expect(describeChat({ ...c, messages: 1 })).toMatch(/ {2}1 message {2}/);
  });
});

describe('describeConversation (baton chats <id>)', () => {
  const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.0012 };
  const msg = (id: string, role: 'user' | 'assistant', text: string, more: Partial<ChatMessageView> = {}): ChatMessageView => ({ id, role, text, createdAt: `2026-11-26T10:0${id}:00.000Z`, author: role === 'user' ? 'ana' : null, inReplyTo: null, model: role === 'user' ? null : 'claude-sonnet-4-6', offline: false, usage: null, stopReason: role === 'user' ? null : 'end_turn', durationMs: null, error: null, ...more });
  const chat: ChatView = {
    id: 'c-1', team: 'research', createdAt: '', updatedAt: '', version: 9, usage,
    messages: [msg('1', 'user', 'Research NATS'), msg('2', 'assistant', 'Sure.'), msg('3', 'user', 'And Kafka?'), msg('4', 'assistant', '', { error: { code: 'model_error', message: '529 overloaded' }, model: null }), msg('5', 'user', 'Kafka, please'), msg('6', 'assistant', 'Kafka is', { stopReason: 'max_tokens' })],
    tasks: [{ taskId: 't-1', team: 'research', afterMessageId: '2', leftOut: 1, createdAt: '' }],
  };
  it('each message under who and when, a failed reply as such, a cut reply said, each task right after the message its prompt ends with', () => {
    const text = describeConversation(chat);
    expect(text.split('\n')[0]).toBe('chat c-1  team research  5 messages  cost $0.0012');
    expect(text).toContain('ana, 2026-11-26T10:01:00.000Z:\nResearch NATS');
    expect(text).toContain('assistant (claude-sonnet-4-6), 2026-11-26T10:02:00.000Z:\nSure.\n\n-- started task t-1 (team research; 1 message left out of its prompt): baton status t-1\n\nana, 2026-11-26T10:03:00.000Z:');
    expect(text).toContain('assistant, 2026-11-26T10:04:00.000Z:\nthe reply failed (model_error): 529 overloaded');
    expect(text).toContain('assistant (claude-sonnet-4-6), 2026-11-26T10:06:00.000Z — cut at its length limit (CHAT_MAX_TOKENS):\nKafka is');
    expect(text).not.toMatch(/no reply recorded yet/);
  });
  it('a last message with no reply yet says so', () => {
    expect(describeConversation({ ...chat, messages: chat.messages.slice(0, 5) })).toMatch(/\(no reply recorded yet: being written, or lost if the gateway stopped mid-reply — send another message to go on\)$/);
  });
});

describe('listing', () => {
  it('a line per item, or what says there is none', () => {
    expect(listing(['a', 'b'], (x) => `item ${x}`, 'none')).toBe('item a\nitem b');
    expect(listing([], (x: string) => x, 'no tasks')).toBe('no tasks');
  });
});
