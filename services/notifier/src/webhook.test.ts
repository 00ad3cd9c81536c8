import { describe, expect, it } from 'vitest';
import { evolve, type DecidedEvent } from '@baton/domain';
import { recorded, stateOf } from '@baton/testing';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { webhookAgent } from './egress.ts';
import { deliveryOutcome } from './send.ts';
import { CLOCK_TOLERANCE_MS, deliver, endpointServes, needsState, sign, verify, webhookMessagesFor } from './webhook.ts';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('Standard Webhooks signatures', () => {
  it('matches the reference vector of the Standard Webhooks spec', () => {
    // From the standard-webhooks reference libraries' tests.
    const body = '{"test": 2432232314}';
    expect(sign(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });
  it('verifies, and rejects tampering, stale timestamps and wrong secrets', () => {
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    const headers = { id: 'msg_1', timestamp: String(ts), signature: sign(secret, 'msg_1', ts, 'body') };
    expect(verify(secret, headers, 'body', 300, now)).toBe(true);
    expect(verify(secret, headers, 'body!', 300, now)).toBe(false);
    expect(verify(secret, headers, 'body', 300, now + 10 * 60_000)).toBe(false);
    expect(verify('whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', headers, 'body', 300, now)).toBe(false);
    expect(verify(secret, { ...headers, signature: `v1,bogus ${headers.signature}` }, 'body', 300, now)).toBe(true); // rotation: several signatures
  });
});

/** The messages each event of a history makes (event.* left out), from the fold before and after it. */
function messagesAlong(history: DecidedEvent[]): string[][] {
  const events = recorded(history);
  return events.map((e, i) => {
    const before = stateOf(events.slice(0, i));
    return webhookMessagesFor(e, before, evolve(before, e)).filter((m) => !m.type.startsWith('event.')).map((m) => (m.agentId ? `${m.type}:${m.agentId}` : m.requestId ? `${m.type}:${m.requestId}` : m.type));
  });
}

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const submitted: DecidedEvent = { type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null } };
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } };
const turn = (agentId: string, n: number, toolUses: { id: string; name: string; input: Record<string, unknown> }[]): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: { agentId, turn: n, model: 'm', content: [{ type: 'text', text: 't' }, ...toolUses.map((t) => ({ type: 'tool_use' as const, ...t }))], stopReason: toolUses.length ? 'tool_use' : 'end_turn', usage, offline: true, durationMs: 1 },
});
const clarify = (requestId: string, agentId: string, toolUseId: string): DecidedEvent => ({ type: 'ClarificationRequested', data: { requestId, agentId, toolUseId, questions: ['What?'], context: 'c' } });

describe('webhook messages', () => {
  it('event.<EventType> for every event', () => {
    const events = recorded([submitted]);
    expect(webhookMessagesFor(events[0]!, stateOf([]), stateOf(events))).toContainEqual({ type: 'event.TaskSubmitted', agentId: null });
  });

  it('task.<status> on each status change, from the fold before and after; agent.* for a subagent (first start only), never for the lead', () => {
    const history: DecidedEvent[] = [
      submitted, // pending: nothing
      started, // → running
      turn('lead', 1, [{ id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }]),
      { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } },
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r1' } }, // the claim (task stream): agent.started
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r1' } }, // the same attempt's fence (agent stream): not a second start
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 2, runnerId: 'r2' } }, // a retry: not a new start
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 2, runnerId: 'r2' } },
      turn('researcher-1', 1, [{ id: 'tu2', name: 'AskUserQuestion', input: { questions: ['What?'] } }]),
      clarify('clr-1', 'researcher-1', 'tu2'), // → awaiting_input, agent.awaiting_input
      { type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['that'], answeredBy: 'u' } }, // → running
      { type: 'SubagentCompleted', data: { agentId: 'researcher-1', attempt: 2, summary: 's', filesCreated: [], filesModified: [], success: true, iterationCapReached: false } },
      { type: 'SubagentFailed', data: { agentId: 'lead', code: 'x', message: 'm' } }, // the lead is no subagent
      { type: 'TaskCompleted', data: { summary: 'done', reportPath: null } },
    ];
    expect(messagesAlong(history)).toEqual([
      [],
      ['task.running'],
      [],
      [],
      ['agent.started:researcher-1'],
      [],
      [],
      [],
      [],
      ['task.awaiting_input', 'request.opened:clr-1', 'agent.awaiting_input:researcher-1'],
      ['task.running'],
      ['agent.completed:researcher-1'],
      [],
      ['task.completed'],
    ]);
  });

  it('task.awaiting_input again when a further request opens while the task waits; the lead asking is task.* only', () => {
    const history: DecidedEvent[] = [
      submitted,
      started,
      turn('lead', 1, [{ id: 'tu1', name: 'AskUserQuestion', input: { questions: ['a?'] } }, { id: 'tu2', name: 'AskUserQuestion', input: { questions: ['b?'] } }]),
      clarify('clr-1', 'lead', 'tu1'),
      clarify('clr-2', 'lead', 'tu2'),
      { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } },
    ];
    expect(messagesAlong(history)).toEqual([[], ['task.running'], [], ['task.awaiting_input', 'request.opened:clr-1'], ['task.awaiting_input', 'request.opened:clr-2'], ['task.cancelled']]);
  });

  it('request.opened once per request, whether or not the status changed with it; task.awaiting_input follows the status (two researchers ask; one is answered and finishes: the task waits on the other again)', () => {
    const history: DecidedEvent[] = [
      submitted,
      started,
      turn('lead', 1, [{ id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }, { id: 'tu2', name: 'Task', input: { agent: 'researcher', prompt: 'q' } }]),
      { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } },
      { type: 'SubagentDispatched', data: { agentId: 'researcher-2', agentType: 'researcher', toolUseId: 'tu2', prompt: 'q' } },
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r1' } },
      { type: 'SubagentStarted', data: { agentId: 'researcher-2', attempt: 1, runnerId: 'r1' } },
      turn('researcher-1', 1, [{ id: 'a1', name: 'AskUserQuestion', input: { questions: ['What?'] } }]),
      turn('researcher-2', 1, [{ id: 'a2', name: 'AskUserQuestion', input: { questions: ['What?'] } }]),
      clarify('clr-1', 'researcher-1', 'a1'),
      clarify('clr-2', 'researcher-2', 'a2'),
      { type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['that'], answeredBy: 'u' } }, // researcher-1 works again: running, clr-2 still open
      { type: 'SubagentCompleted', data: { agentId: 'researcher-1', attempt: 1, summary: 's', filesCreated: [], filesModified: [], success: true, iterationCapReached: false } }, // back to waiting on clr-2
    ];
    expect(messagesAlong(history).slice(9)).toEqual([['request.opened:clr-1', 'agent.awaiting_input:researcher-1'], ['task.awaiting_input', 'request.opened:clr-2', 'agent.awaiting_input:researcher-2'], ['task.running'], ['task.awaiting_input', 'agent.completed:researcher-1']]);
  });

  it('an event a fork copied makes no message, not even event.*: the fork notifies what happens after it', () => {
    const [copied] = recorded([started]);
    const before = stateOf(recorded([submitted]));
    const asCopied = { ...copied!, metadata: { ...copied!.metadata, copiedFrom: 'a1b2c3d4-0000-4000-8000-000000000000' } };
    expect(webhookMessagesFor(copied!, before, evolve(before, copied!)).map((m) => m.type)).toEqual(['event.TaskStarted', 'task.running']);
    expect(webhookMessagesFor(asCopied, before, evolve(before, asCopied))).toEqual([]);
  });

  it('a subscription needs the state unless it names only event.* types', () => {
    expect(needsState(['event.TaskCompleted'])).toBe(false);
    expect(needsState(['event.TaskCompleted', 'agent.failed'])).toBe(true);
  });
});

describe('a delivery that fails before any answer', () => {
  it('says why — refused, or TLS to a server that speaks plain HTTP — not just "fetch failed"', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const agent = webhookAgent({ allowPrivateNetworks: true });
    try {
      const tls = await deliver(`https://127.0.0.1:${port}/hook`, {}, '{}', 5000, agent);
      expect(tls.ok).toBe(false);
      expect(tls.error).toMatch(/^fetch failed: .*(SSL|TLS|ssl|tls|EPROTO)/);
    } finally {
      await new Promise((r) => server.close(r));
    }
    const refused = await deliver(`http://127.0.0.1:${port}/hook`, {}, '{}', 5000, agent); // closed now
    expect(refused.error).toMatch(/^fetch failed: .*ECONNREFUSED/);
  });
});

describe("a tenant endpoint's events", () => {
  it('are those recorded after it was made, give or take the clocks of the services and Postgres', () => {
    const endpoint = { createdAt: new Date('2026-11-27T11:00:00.000Z') };
    const at = (ms: number) => ({ recordedAt: new Date(endpoint.createdAt.getTime() + ms).toISOString() });
    expect([at(1), at(0), at(-CLOCK_TOLERANCE_MS), at(-CLOCK_TOLERANCE_MS - 1), at(-60_000)].map((e) => endpointServes(endpoint, e))).toEqual([true, true, true, false, false]);
  });
});

describe('baton_deliveries_total outcome of a webhook attempt', () => {
  it('failed only when given up (the last attempt, or a redelivery, tried once); retried while the notifiers try again', () => {
    const auto = { lastAttempt: false, redeliveryId: null };
    expect(deliveryOutcome({ ok: true, gone: false }, auto)).toBe('delivered');
    expect(deliveryOutcome({ ok: false, gone: true }, auto)).toBe('gone');
    expect(deliveryOutcome({ ok: false, gone: false }, auto)).toBe('retried');
    expect(deliveryOutcome({ ok: false, gone: false }, { ...auto, lastAttempt: true })).toBe('failed');
    expect(deliveryOutcome({ ok: false, gone: false }, { ...auto, redeliveryId: '7' })).toBe('failed');
  });
});
