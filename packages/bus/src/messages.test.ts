import type { DecidedEvent } from '@baton/domain';
import { recorded, waitFor } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import { headers } from '@nats-io/nats-core';
import { CURRENT_SCHEMA_VERSION } from '@baton/domain';
import { BusEvent, encodeEvent, EVENT_SCHEMA_HEADER, MAX_EVENT_MESSAGE_BYTES, messagesFor, publishWakeUps, readRelayed, recordedFromBus, RELAYED_CURSOR_HEADER, RELAYED_PREV_HEADER } from './messages.ts';
import { busNames } from './subjects.ts';

const names = busNames('');
const subjects = (e: DecidedEvent): string[] => messagesFor(recorded([e])[0]!, names).map((m) => m.subject.split('.').slice(0, 2).join('.') + (m.subject.includes('.jobs.') ? `.${m.subject.split('.')[2]}.${m.subject.split('.').at(-1)}` : ''));

describe('what the relay publishes for an event', () => {
  it('a decision on a subagent\'s request makes a runner job for that agent, not a lead trigger', () => {
    expect(subjects({ type: 'ClarificationAnswered', data: { requestId: 'c', answers: ['a'], answeredBy: 'u', agentId: 'researcher-2' } })).toEqual(['baton.events', 'baton.jobs.run.researcher-2']);
    expect(subjects({ type: 'ApprovalGranted', data: { requestId: 'a', input: {}, edited: false, decidedBy: 'u', agentId: 'researcher-1' } })).toEqual(['baton.events', 'baton.jobs.run.researcher-1']);
    expect(subjects({ type: 'ClarificationTimedOut', data: { requestId: 'c', agentId: 'writer-1' } })).toEqual(['baton.events', 'baton.jobs.run.writer-1']);
  });
  it('a decision for the lead (or from before decisions named their agent) wakes the lead', () => {
    expect(subjects({ type: 'ApprovalRejected', data: { requestId: 'a', reason: 'r', decidedBy: 'u', agentId: 'lead' } })).toEqual(['baton.events', 'baton.triggers']);
    expect(subjects({ type: 'ApprovalRejected', data: { requestId: 'a', reason: 'r', decidedBy: 'u' } })).toEqual(['baton.events', 'baton.triggers']);
  });
  it('a request a subagent opened wakes the orchestrator (its deadline timer); cancel and failure release workspaces; a turn is only an event', () => {
    expect(subjects({ type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'researcher-1', toolUseId: 't', questions: ['q'], context: '' } })).toEqual(['baton.events', 'baton.triggers']);
    expect(subjects({ type: 'ApprovalRequested', data: { requestId: 'a', agentId: 'writer-1', toolUseId: 't', toolName: 'write', input: {}, inputDigest: 'd', plan: 'p', deadline: '2026-01-01T00:00:00.000Z', onTimeout: 'reject' } })).toEqual(['baton.events', 'baton.triggers']);
    expect(subjects({ type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } })).toEqual(['baton.events', 'baton.jobs.release.all']);
    expect(subjects({ type: 'TaskFailed', data: { code: 'c', message: 'm' } })).toEqual(['baton.events', 'baton.jobs.release.all']);
    // One agent failed while its task goes on: its sandbox goes now (it had waited for the task's end).
    expect(subjects({ type: 'SubagentFailed', data: { agentId: 'researcher-1', code: 'agent_lost', message: 'm' } })).toEqual(['baton.events', 'baton.triggers', 'baton.jobs.release.researcher-1']);
    expect(subjects({ type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 't', prompt: 'p' } })).toEqual(['baton.events', 'baton.jobs.run.researcher-1']);
  });
  it('a raised budget wakes the lead and gives every subagent it paused a job of its own (distinct message ids)', () => {
    const e = recorded([{ type: 'BudgetRaised', data: { requestId: 'budget-1', limit: { usd: 1, tokens: null }, decidedBy: 'u', resumes: ['researcher-1', 'writer-1'] } }])[0]!;
    const out = messagesFor(e, names);
    expect(out.map((m) => m.subject.split('.').slice(0, 2).join('.') + (m.subject.includes('.jobs.') ? `.${m.subject.split('.').at(-1)}` : ''))).toEqual(['baton.events', 'baton.triggers', 'baton.jobs.researcher-1', 'baton.jobs.writer-1']);
    expect(new Set(out.map((m) => m.msgId)).size).toBe(4);
    expect(subjects({ type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'researcher-1', spent: { usd: 1, tokens: 1 }, limit: { usd: 1, tokens: null }, deadline: '2026-01-01T00:00:00.000Z', onTimeout: 'stop' } })).toEqual(['baton.events', 'baton.triggers']);
  });
  it("a request the lead opened wakes nobody: the orchestrator whose step opened it armed the deadline, and the lead waits for the answer", () => {
    expect(subjects({ type: 'ApprovalRequested', data: { requestId: 'a', agentId: 'lead', toolUseId: 't', toolName: 'plan', input: {}, inputDigest: 'd', plan: 'p', deadline: '2026-01-01T00:00:00.000Z', onTimeout: 'reject' } })).toEqual(['baton.events']);
    expect(subjects({ type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'lead', toolUseId: 't', questions: ['q'], context: '' } })).toEqual(['baton.events']);
    expect(subjects({ type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'lead', spent: { usd: 1, tokens: 1 }, limit: { usd: 1, tokens: null }, deadline: '2026-01-01T00:00:00.000Z', onTimeout: 'stop' } })).toEqual(['baton.events']);
  });
});

describe('what a writer publishes after its commit (the fast path)', () => {
  it('a step wakes nobody and is not encoded (only its task goes in a live tick); a lead trigger is encoded once', async () => {
    let encoded = 0;
    const counted = <T extends object>(data: T): T => ({ ...data, toJSON: () => (encoded++, data) });
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const steps = recorded([
      { type: 'ModelTurnRecorded', data: counted({ agentId: 'lead', turn: 1, model: 'm', content: [], stopReason: 'end_turn', usage, offline: true, durationMs: 0 }) },
      { type: 'ToolResultsRecorded', data: counted({ agentId: 'lead', results: [] }) },
    ] as DecidedEvent[]);
    const sent: string[] = [];
    const nc = { publish: (subject: string) => void sent.push(subject) };
    publishWakeUps(nc, names, steps);
    await waitFor(() => sent.length > 0, { what: 'the live tick' });
    expect(encoded).toBe(0);
    expect(sent).toEqual([names.liveTicks]);
    const [granted] = recorded([{ type: 'ApprovalGranted', data: counted({ requestId: 'a', input: {}, edited: false, decidedBy: 'u', agentId: 'lead' }) }] as DecidedEvent[], { from: 2 });
    publishWakeUps(nc, names, [granted!]);
    await waitFor(() => sent.length > 1, { what: 'the trigger' });
    expect(encoded).toBe(1);
    expect(sent.slice(1).map((s) => s.split('.').slice(0, 2).join('.'))).toEqual(['baton.triggers']);
  });
});

describe('a relayed event as a live view reads it', () => {
  const e = recorded([{ type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }])[0]!;
  const msg = (h: Record<string, string>, data: Uint8Array = messagesFor(e, names)[0]!.data as Uint8Array) => {
    const hs = headers();
    for (const [k, v] of Object.entries(h)) hs.set(k, v);
    return { headers: hs, data };
  };
  const place = `7:${e.position}`;

  it('its place and its link, as the relay wrote them; the event parsed once asked for', () => {
    const [event] = messagesFor(e, names, false, { cursor: { txid: 7n, position: e.position }, prev: { txid: 5n, position: 2n } });
    expect(event?.headers).toEqual({ [RELAYED_CURSOR_HEADER]: place, [RELAYED_PREV_HEADER]: '5:2' });
    const r = readRelayed(msg(event?.headers ?? {}));
    expect(r && { cursor: r.cursor, prev: r.prev }).toEqual({ cursor: { txid: 7n, position: e.position }, prev: { txid: 5n, position: 2n } });
    expect(r?.event()).toMatchObject({ id: e.id, type: 'TaskStarted', position: Number(e.position) });
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: place }))?.prev).toBeNull(); // unlinked
  });

  it('no place, or a place or link that is not <txid>:<position>: only a wake-up', () => {
    expect(readRelayed(msg({}))).toBeNull();
    expect(readRelayed({ headers: undefined, data: new Uint8Array() })).toBeNull();
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: '7' }))).toBeNull();
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: place, [RELAYED_PREV_HEADER]: '-1:2' }))).toBeNull();
  });

  it('a body that is not an event, or not the one its place names: no event to show', () => {
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: place }, new TextEncoder().encode('{not json')))?.event()).toBeNull();
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: place }, new TextEncoder().encode('{"id":"x"}')))?.event()).toBeNull();
    expect(readRelayed(msg({ [RELAYED_CURSOR_HEADER]: `7:${e.position + 1n}` }))?.event()).toBeNull();
  });
});

describe('the domain event a bus message carries (recordedFromBus)', () => {
  const sent = (e: ReturnType<typeof recorded>[number]) => BusEvent.parse(JSON.parse(new TextDecoder().decode(encodeEvent(e))));
  const current = String(CURRENT_SCHEMA_VERSION);

  it('is the event as recorded: every field a fold reads, and its data as sent; a lead trigger names its schema version', () => {
    const e = { ...recorded([{ type: 'ApprovalGranted', data: { requestId: 'a', input: { agent: 'researcher' }, edited: false, decidedBy: 'u', agentId: 'lead' } }])[0]!, metadata: { actor: 'u', startedAtMs: 12.5 } };
    const trigger = messagesFor(e, names).find((m) => m.subject.startsWith('baton.triggers.'));
    expect(trigger?.headers?.[EVENT_SCHEMA_HEADER]).toBe(current);
    expect(recordedFromBus(sent(e), trigger?.headers?.[EVENT_SCHEMA_HEADER])).toEqual(e);
  });

  it('another schema version (or none named), an event this version does not know, data that does not parse, or a time that is not one: null (read it instead)', () => {
    const e = recorded([{ type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } }])[0]!;
    expect(recordedFromBus(sent(e), current)).not.toBeNull();
    expect(recordedFromBus(sent(e), undefined)).toBeNull();
    expect(recordedFromBus(sent(e), String(CURRENT_SCHEMA_VERSION + 1))).toBeNull();
    expect(recordedFromBus({ ...sent(e), type: 'SomethingNew' }, current)).toBeNull();
    expect(recordedFromBus({ ...sent(e), data: { leadAgentId: 7 } }, current)).toBeNull();
    expect(recordedFromBus({ ...sent(e), metadata: 'x' }, current)).toBeNull();
    expect(recordedFromBus({ ...sent(e), recordedAt: 'yesterday' }, current)).toBeNull();
  });
});


describe('an event too big to carry (MAX_EVENT_MESSAGE_BYTES)', () => {
  const big = recorded([{ type: 'TaskCompleted', data: { summary: 'x'.repeat(MAX_EVENT_MESSAGE_BYTES), reportPath: null } }])[0]!;
  const small = recorded([{ type: 'TaskCompleted', data: { summary: 'done', reportPath: null } }])[0]!;
  const decoded = (bytes: Uint8Array) => BusEvent.parse(JSON.parse(new TextDecoder().decode(bytes)));

  it('travels without its data, well under NATS\'s default max_payload, and everything that would apply it reads the log instead', () => {
    const bytes = encodeEvent(big);
    expect(bytes.byteLength).toBeLessThan(4096);
    expect(decoded(bytes)).toMatchObject({ id: big.id, type: 'TaskCompleted', position: Number(big.position), data: null });
    expect(recordedFromBus(decoded(bytes), String(CURRENT_SCHEMA_VERSION))).toBeNull();
    const hs = headers();
    hs.set(RELAYED_CURSOR_HEADER, `7:${big.position}`);
    expect(readRelayed({ headers: hs, data: bytes })?.event()).toBeNull();
    // Every message for it (the event, its lead trigger) is as small.
    expect(messagesFor(big, names).every((m) => (m.data as Uint8Array).byteLength < 4096)).toBe(true);
  });

  it('an event that fits is carried whole', () => {
    expect(decoded(encodeEvent(small)).data).toEqual(small.data);
    expect(recordedFromBus(decoded(encodeEvent(small)), String(CURRENT_SCHEMA_VERSION))).toEqual(small);
  });
});
