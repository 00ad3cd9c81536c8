import { given, recorded, stateOf } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import { budgetHold, budgetReached, describeSpend, nextBudgetRequestId, raisedLimit, spentOf } from './budget.ts';
import type { Command, DecidedEvent } from './commands.ts';
import { IllegalTransitionError, InvalidCommandError, StaleAttemptError } from './errors.ts';
import { wakes } from './events.ts';
import { deriveStatus, hasMachineWork, leadNeedsTurn, nextDeadline } from './state.ts';
import { schedulePlan } from './schedule.ts';

const NOW = new Date('2026-01-01T00:10:00.000Z');
const usage = (tokens: number, costUsd: number) => ({ inputTokens: tokens - 10, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd });
const submitted = (budget: { usd: number | null; tokens: number | null } | null): DecidedEvent => ({
  type: 'TaskSubmitted',
  data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget },
});
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } };
const turn = (agentId: string, n: number, tokens: number, usd: number, toolUse?: string): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: {
    agentId,
    turn: n,
    model: 'm',
    content: toolUse ? [{ type: 'tool_use', id: toolUse, name: 'Task', input: { agent: 'researcher', prompt: 'p' } }] : [{ type: 'text', text: 'working' }],
    stopReason: toolUse ? 'tool_use' : 'end_turn',
    usage: usage(tokens, usd),
    offline: true,
    durationMs: 1,
  },
});
const dispatched: DecidedEvent = { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } };
const agentStarted: DecidedEvent = { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r1' } };
const exceeded = (spent: { usd: number; tokens: number }, limit: { usd: number | null; tokens: number | null }, agentId = 'researcher-1'): DecidedEvent => ({
  type: 'BudgetExceeded',
  data: { requestId: 'budget-1', agentId, spent, limit, deadline: '2026-01-01T00:20:00.000Z', onTimeout: 'stop' },
});
const paused: DecidedEvent = { type: 'SubagentPaused', data: { agentId: 'researcher-1', attempt: 1, reason: 'budget' } };

/** A research task with a $0.10 / 1000-token budget: the lead delegated, its researcher runs. */
const base = (budget = { usd: 0.1, tokens: 1000 }): DecidedEvent[] => [submitted(budget), started, turn('lead', 1, 100, 0.01, 'tu1'), dispatched, agentStarted];
/** The researcher's turn took the task past its token limit (1100 of 1000). */
const crossed = [...base(), turn('researcher-1', 1, 1000, 0.02)];

describe('budget reached', () => {
  it('spent counts every token of every agent, and usd', () => {
    const s = stateOf(recorded(crossed));
    expect(spentOf(s)).toEqual({ usd: 0.03, tokens: 1100 });
    expect(budgetReached(s)).toEqual(['tokens']);
    expect(budgetReached(stateOf(recorded(base())))).toEqual([]);
    expect(budgetReached(stateOf(recorded([submitted(null), started, turn('lead', 1, 5000, 9)])))).toEqual([]);
  });

  it('a subagent about to call its model opens the request and pauses; the lead only opens it', () => {
    const s = stateOf(recorded(crossed));
    expect(budgetHold(s, 'researcher-1', { attempt: 1, now: NOW })).toEqual([
      { type: 'ExceedBudget', requestId: 'budget-1', agentId: 'researcher-1', deadline: '2026-01-01T00:20:00.000Z' },
      { type: 'PauseSubagent', agentId: 'researcher-1', attempt: 1, reason: 'budget' },
    ]);
    expect(budgetHold(s, 'lead', { now: NOW })).toEqual([{ type: 'ExceedBudget', requestId: 'budget-1', agentId: 'lead', deadline: '2026-01-01T00:20:00.000Z' }]);
    // Under the limit, or no budget: go on.
    expect(budgetHold(stateOf(recorded(base())), 'lead', { now: NOW })).toBeNull();
  });

  it('while the request is open every agent holds: the lead waits, a subagent pauses', () => {
    const s = stateOf(recorded([...crossed, exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 })]));
    expect(budgetHold(s, 'lead', { now: NOW })).toEqual([]);
    expect(budgetHold(s, 'researcher-1', { attempt: 1, now: NOW })).toEqual([{ type: 'PauseSubagent', agentId: 'researcher-1', attempt: 1, reason: 'budget' }]);
  });

  it('ExceedBudget records what was spent against the limit; a second one, or one under the limit, records nothing', () => {
    const ask: Command = { type: 'ExceedBudget', requestId: 'budget-1', agentId: 'researcher-1', deadline: '2026-01-01T00:20:00.000Z' };
    const s = given(crossed).when(ask).then([exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 })]);
    expect(Object.values(s.pendingRequests)).toEqual([expect.objectContaining({ kind: 'budget', requestId: 'budget-1', spent: { usd: 0.03, tokens: 1100 }, onTimeout: 'stop' })]);
    expect(nextDeadline(s)).toBe('2026-01-01T00:20:00.000Z');
    given([...crossed, exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 })]).when(ask).then([]);
    given(base()).when(ask).then([]);
  });

  it('PauseSubagent needs an open budget request and the current attempt', () => {
    const open = [...crossed, exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 })];
    const s = given(open).when({ type: 'PauseSubagent', agentId: 'researcher-1', attempt: 1, reason: 'budget' }).then([paused]);
    expect(s.agents['researcher-1']).toMatchObject({ status: 'paused', heldByBudget: true });
    given(open).when({ type: 'PauseSubagent', agentId: 'researcher-1', attempt: 2, reason: 'budget' }).thenThrows(StaleAttemptError);
    given(crossed).when({ type: 'PauseSubagent', agentId: 'researcher-1', attempt: 1, reason: 'budget' }).thenThrows(IllegalTransitionError, /no budget request is open/);
  });

  it('held, with its agents paused, the task awaits input and has no machine work; nothing is scheduled', () => {
    const s = stateOf(recorded([...crossed, exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 }), paused]));
    expect(deriveStatus(s)).toBe('awaiting_input');
    expect(leadNeedsTurn(s)).toBe(false);
    expect(hasMachineWork(s)).toBe(false);
    expect(schedulePlan(s)).toEqual([]);
  });
});

describe('deciding on the budget', () => {
  const held = [...crossed, exceeded({ usd: 0.03, tokens: 1100 }, { usd: 0.1, tokens: 1000 }), paused];
  const approve = (budget?: { usd?: number; tokens?: number }, input?: Record<string, unknown>): Command => ({ type: 'DecideApproval', requestId: 'budget-1', decision: 'approve', budget, input, decidedBy: 'ann' });

  it('a raise sets the new limit and resumes the paused subagents (each gets a job) and the lead', () => {
    const s = given(held).when(approve({ tokens: 5000 })).then([{ type: 'BudgetRaised', data: { requestId: 'budget-1', limit: { usd: 0.1, tokens: 5000 }, decidedBy: 'ann', resumes: ['researcher-1'] } }]);
    expect(s.budget).toEqual({ usd: 0.1, tokens: 5000 });
    expect(s.agents['researcher-1']).toMatchObject({ status: 'dispatched', heldByBudget: false });
    expect(s.pendingRequests).toEqual({});
    expect(s.decidedRequests['budget-1']?.decision).toBe('raised to $0.1, 5000 tokens');
    expect(s.status).toBe('running');
    expect(budgetHold(s, 'researcher-1', { attempt: 2, now: NOW })).toBeNull();
    expect(wakes({ type: 'BudgetRaised', data: { resumes: ['researcher-1', 'writer-1'] } })).toEqual({ lead: true, subagents: ['researcher-1', 'writer-1'] });
  });

  it('a raise must name a limit above what was spent, and takes no tool input', () => {
    given(held).when(approve()).thenThrows(InvalidCommandError, /name the new limit/);
    // Raising the other measure: the one it reached is named, with what to do.
    given(held).when(approve({ usd: 5 })).thenThrows(InvalidCommandError, /budget.tokens: 1000 is not above what the task has spent \(1100 tokens\) — the limit it reached; raise it too$/);
    given(held).when(approve({ tokens: 1100 })).thenThrows(InvalidCommandError, /budget.tokens: 1100 is not above what the task has spent \(1100 tokens\)$/);
    given(held).when(approve({ tokens: 5000, usd: 0.01 })).thenThrows(InvalidCommandError, /budget.usd/);
    given(held).when(approve({ tokens: 5000 }, { x: 1 })).thenThrows(InvalidCommandError, /takes budget, not input/);
    expect(raisedLimit(stateOf(recorded(held)), { tokens: 2000 })).toEqual({ ok: true, limit: { usd: 0.1, tokens: 2000 } });
  });

  it('a rejection stops the run: the task fails with budget_exceeded, naming who and why', () => {
    const s = given(held)
      .when({ type: 'DecideApproval', requestId: 'budget-1', decision: 'reject', reason: 'too dear', decidedBy: 'ann' })
      .then([
        { type: 'BudgetRefused', data: { requestId: 'budget-1', reason: 'too dear', decidedBy: 'ann', timedOut: false } },
        { type: 'TaskFailed', data: { code: 'budget_exceeded', message: 'the task reached its budget ($0.0300 of $0.1000, 1100 of 1000 tokens); stopped by ann: too dear' } },
      ]);
    expect(s.status).toBe('failed');
    expect(s.agents['researcher-1']?.status).toBe('cancelled');
  });

  it('the deadline stops the run', () => {
    const s = given(held).when({ type: 'TimeOutApproval', requestId: 'budget-1' }).state();
    expect(s.status).toBe('failed');
    expect(s.error).toEqual({ code: 'budget_exceeded', message: expect.stringMatching(/nobody decided before the deadline/) });
    expect(s.decidedRequests['budget-1']?.decision).toBe('timed out (stopped)');
  });

  it('an approval request refuses a budget; a budget request is not answered like a question', () => {
    given(held).when({ type: 'AnswerClarification', requestId: 'budget-1', answers: ['x'], answeredBy: 'ann' }).thenThrows(InvalidCommandError, /budget request, not a clarification/);
  });

  it('the next crossing opens budget-2', () => {
    const raised: DecidedEvent = { type: 'BudgetRaised', data: { requestId: 'budget-1', limit: { usd: 0.1, tokens: 2000 }, decidedBy: 'ann', resumes: ['researcher-1'] } };
    const s = stateOf(recorded([...held, raised, { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 2, runnerId: 'r1' } }, turn('researcher-1', 2, 1000, 0.01)]));
    expect(nextBudgetRequestId(s)).toBe('budget-2');
    expect(budgetHold(s, 'researcher-1', { attempt: 2, now: NOW })?.[0]).toMatchObject({ type: 'ExceedBudget', requestId: 'budget-2' });
  });
});

describe('describeSpend', () => {
  it('dollars with cents, four decimals under a dollar, and a tiny limit as it is (not $0.0000)', () => {
    expect(describeSpend({ usd: 12.5, tokens: 3000 }, { usd: 20, tokens: 10_000 })).toBe('$12.50 of $20.00, 3000 of 10000 tokens');
    expect(describeSpend({ usd: 0.52, tokens: 0 }, { usd: 0.5, tokens: null })).toBe('$0.5200 of $0.5000');
    expect(describeSpend({ usd: 0, tokens: 0 }, { usd: 0.000001, tokens: null })).toBe('$0.0000 of $0.0000010');
  });
});
