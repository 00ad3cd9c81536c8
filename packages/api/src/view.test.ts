import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fold, type RecordedEvent } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { describeCall, toAgentViews, toEventView, toTaskView } from './view.ts';

// The domain's released (v1) event fixtures, folded and shown as the API shows them.
const fixture = path.join(import.meta.dirname, '../../domain/src/fixtures/v1/research-run.json');
const raw = JSON.parse(readFileSync(fixture, 'utf8')) as { type: string; streamId: string; version: number; data: unknown }[];
const events = raw.map((e, i) => ({ ...e, id: `e${i}`, taskId: '00000000-0000-4000-8000-000000000001', position: BigInt(i + 1), recordedAt: new Date(Date.UTC(2026, 10, 22, 4, 0, i)), metadata: {}, schemaVersion: 1 })) as RecordedEvent[];

describe('views', () => {
  it('toTaskView: the API task of the v1 fixture run', () => {
    expect(toTaskView(fold(events))).toMatchObject({
      status: 'completed',
      version: 12,
      agents: [{ id: 'researcher-1', status: 'completed', turns: 1, filesCreated: ['notes.md'] }],
      artifacts: [{ path: 'notes.md', bytes: 1 }],
      result: { summary: 'done' },
      pendingRequests: [],
    });
  });
  it('toTaskView refuses a task that does not exist', () => {
    expect(() => toTaskView(fold([]))).toThrow(/does not exist/);
  });
  it('toEventView: positions as numbers, times as ISO strings', () => {
    const e = events[0] as RecordedEvent;
    expect(toEventView(e)).toEqual({ id: 'e0', type: e.type, taskId: e.taskId, streamId: e.streamId, version: e.version, position: 1, recordedAt: '2026-11-22T04:00:00.000Z', data: e.data, metadata: {} });
  });
});

describe('what an agent is doing, in words', () => {
  it('names the call: searching, writing, running tests, a command; others by their tool', () => {
    expect(describeCall({ name: 'web_search', input: { query: 'vector databases  in\nproduction' } })).toBe('searching: vector databases in production');
    expect(describeCall({ name: 'write_file', input: { path: 'report.md', content: 'x' } })).toBe('writing report.md');
    expect(describeCall({ name: 'run_tests', input: {} })).toBe('running tests');
    expect(describeCall({ name: 'run_command', input: { command: 'x'.repeat(100) } })).toBe(`running: ${'x'.repeat(59)}…`);
    expect(describeCall({ name: 'bench_step', input: {} })).toBe('running bench_step');
  });
});

describe('an agent held at the budget', () => {
  it('is said to be paused at the budget, not thinking', () => {
    const T = '00000000-0000-4000-8000-000000000002';
    const usage = { inputTokens: 990, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.01 };
    const turn = (agentId: string, n: number, toolUse?: string) => ({ type: 'ModelTurnRecorded', data: { agentId, turn: n, model: 'm', content: toolUse ? [{ type: 'tool_use', id: toolUse, name: 'Task', input: { agent: 'researcher', prompt: 'p' } }] : [{ type: 'text', text: 'working' }], stopReason: toolUse ? 'tool_use' : 'end_turn', usage, offline: true, durationMs: 1 } });
    const history = [
      { type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: { usd: null, tokens: 1000 } } },
      { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } },
      turn('lead', 1, 'tu1'),
      { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } },
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r1' } },
      turn('researcher-1', 1),
      { type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'researcher-1', spent: { usd: 0.02, tokens: 2000 }, limit: { usd: null, tokens: 1000 }, deadline: '2026-01-01T00:20:00.000Z', onTimeout: 'stop' } },
      { type: 'SubagentPaused', data: { agentId: 'researcher-1', attempt: 1, reason: 'budget' } },
    ].map((e, i) => ({ ...e, id: `b${i}`, taskId: T, streamId: `task-${T}`, version: i + 1, position: BigInt(i + 1), recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)), metadata: {}, schemaVersion: 1 })) as RecordedEvent[];
    const researcher = toAgentViews(fold(history)).find((a) => a.id === 'researcher-1');
    expect(researcher).toMatchObject({ status: 'paused', currentAction: 'paused at the budget: waiting for a person to raise it or stop the run' });
  });

  it("the lead running a plan counts its subtasks done, and in a round of changes names the round (not 2/2 done going back to 0/2)", () => {
    // A recorded engineering run (the verify corpus): two subtasks, a review asking for changes, a round of changes.
    const run = JSON.parse(readFileSync(path.join(import.meta.dirname, '../../agents/src/fixtures/runs/engineering-reviewed.json'), 'utf8')) as (RecordedEvent & { position: string; recordedAt: string })[];
    const upTo = (last: (e: RecordedEvent) => boolean): RecordedEvent[] => {
      const all = run.map((e) => ({ ...e, position: BigInt(e.position), recordedAt: new Date(e.recordedAt) })) as RecordedEvent[];
      return all.slice(0, all.findIndex(last) + 1);
    };
    const lead = (events: RecordedEvent[]) => toAgentViews(fold(events))[0]?.currentAction;
    expect(lead(upTo((e) => e.type === 'SubagentCompleted' && e.data.agentId === 'backend'))).toBe('running the plan (1/2 subtasks done)');
    expect(lead(upTo((e) => e.type === 'SubagentDispatched' && e.data.agentId === 'frontend-fix1'))).toBe('running the plan, round 1 of changes (0/2 subtasks done)');
    expect(lead(upTo((e) => e.type === 'SubagentCompleted' && e.data.agentId === 'backend-fix1'))).toBe('running the plan, round 1 of changes (1/2 subtasks done)');
  });
});

describe('an agent whose model API cannot answer', () => {
  it('is said to wait for the model API (since when, how many failed calls, the last words), not to be thinking; its turn ends that', () => {
    const T = '00000000-0000-4000-8000-000000000003';
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const history = [
      { type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null } },
      { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } },
      { type: 'ModelUnavailable', data: { agentId: 'lead', error: 'the Messages API could not answer: 529 overloaded' } },
      { type: 'ModelUnavailable', data: { agentId: 'lead', error: 'the Messages API could not answer: 503 service unavailable' } },
    ].map((e, i) => ({ ...e, id: `m${i}`, taskId: T, streamId: `task-${T}`, version: i + 1, position: BigInt(i + 1), recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)), metadata: {}, schemaVersion: 1 })) as RecordedEvent[];
    expect(toAgentViews(fold(history))[0]).toMatchObject({
      currentAction: 'waiting for the model API: 2 failed calls since 2026-01-01T00:00:02.000Z (asked again later; last: the Messages API could not answer: 503 service unavailable)',
      modelOutage: { since: '2026-01-01T00:00:02.000Z', failures: 2, error: 'the Messages API could not answer: 503 service unavailable' },
    });
    const answered = { type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage, offline: false, durationMs: 1 } };
    const after = [...history, { ...answered, id: 'm4', taskId: T, streamId: `task-${T}`, version: 5, position: 5n, recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 4)), metadata: {}, schemaVersion: 1 } as RecordedEvent];
    expect(toAgentViews(fold(after))[0]).toMatchObject({ currentAction: 'finishing', modelOutage: null });
  });
});
