import type { DecidedEvent } from '@baton/domain';
import { recorded } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import { messagesFor } from './messages.ts';
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
