import type { EventView, TaskView } from '@baton/api';
import { describe as group, expect, it } from 'vitest';
import { agentOf, describe, editsOf, onTaskStream, progressText, reportStart, requestTitle, taskNews } from '../ui/describe.ts';

const taskId = '0b7c3f3e-4a51-4f4e-9d55-2d8f6f1c0a11';
const event = (streamId: string, type: string, data: Record<string, unknown>): EventView =>
  ({ id: 'e', type, taskId, streamId, version: 1, position: 1, recordedAt: '2026-11-26T16:00:00.000Z', data, metadata: {} }) as unknown as EventView;

group('the timeline\'s lines', () => {
  it('tells the two records of a subagent\'s start apart: the runner\'s claim on the task stream, then the fence on the agent\'s own stream', () => {
    const claim = event(`task-${taskId}`, 'SubagentStarted', { agentId: 'researcher-1', attempt: 1, runnerId: 'vm-1' });
    const fence = event(`agent-${taskId}-researcher-1`, 'SubagentStarted', { agentId: 'researcher-1', attempt: 1, runnerId: 'vm-1' });
    expect(onTaskStream(claim)).toBe(true);
    expect(onTaskStream(fence)).toBe(false);
    expect(describe(claim)).toBe('researcher-1 runs (attempt 1 on vm-1)');
    expect(describe(fence)).toBe('researcher-1 takes its own stream for attempt 1 (an older attempt still running is fenced off)');
    expect([agentOf(claim), agentOf(fence)]).toEqual(['researcher-1', 'researcher-1']);
  });

  it('names a review by its reviewer (the badge), not by the zero-based round it follows', () => {
    const review = event(`task-${taskId}`, 'ReviewRecorded', { agentId: 'review-1', round: 0, verdict: 'request_changes', issues: [], summary: 'tests missing' });
    expect([agentOf(review), describe(review)]).toEqual(['review-1', 'review: request changes — tests missing']);
  });

  it('shows what an approval with edits changed against what the agent asked (it said only "with edits")', () => {
    const asked = event(`task-${taskId}`, 'ApprovalRequested', { requestId: 'apr-1', agentId: 'lead', toolName: 'Task', input: { agent: 'researcher', prompt: 'everything about databases' } });
    const granted = event(`task-${taskId}`, 'ApprovalGranted', { requestId: 'apr-1', agentId: 'lead', edited: true, decidedBy: 'ana', input: { agent: 'researcher', prompt: 'only vector databases' } });
    expect(describe(granted, [asked, granted])).toBe('approved with edits by ana: prompt: "everything about databases" → "only vector databases"');
    expect(describe(granted)).toBe('approved with edits by ana');
    expect(describe(event(`task-${taskId}`, 'ApprovalGranted', { requestId: 'apr-1', edited: false, decidedBy: 'ana', input: {} }), [asked])).toBe('approved by ana');
    expect(editsOf({ a: 1, b: 'x'.repeat(200) }, { b: 'y', c: [1] })).toEqual(['a: 1 → ∅', `b: "${'x'.repeat(78)}… → "y"`, 'c: ∅ → [1]']);
  });

  it('names the task for task-stream events of no agent', () => {
    expect(agentOf(event(`task-${taskId}`, 'TaskStarted', { leadAgentId: 'lead', leadAgentType: 'research-lead' }))).toBe('task');
  });
});

group('an agent\'s progress line', () => {
  it('counts turns in the singular for one, the lead\'s as a subagent\'s', () => {
    expect(progressText({ progress: { done: 0, total: 0 }, turns: 1, tests: null })).toBe('1 turn');
    expect(progressText({ progress: { done: 1, total: 2 }, turns: 3, tests: null })).toBe('1/2 subtasks done · 3 turns');
    expect(progressText({ progress: { turns: 1 }, turns: 1, tests: null })).toBe('1 turn');
    expect(progressText({ progress: { turns: 2 }, turns: 2, tests: { passed: 15, failed: 0, skipped: 0 } })).toBe('2 turns · tests 15 passed, 0 failed');
  });
});

group('a budget, in words', () => {
  const at = { id: 'b', taskId: 't', streamId: 'task-t', version: 9, position: 20, recordedAt: '2026-11-27T07:00:00.000Z', metadata: {} };
  it('what was spent against each limit it has, not JSON', () => {
    expect(describe({ ...at, type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'researcher-1', spent: { usd: 0, tokens: 2573 }, limit: { usd: null, tokens: 1500 } } } as never)).toBe('budget reached (2573 tokens spent, limit 1500 tokens)');
    expect(describe({ ...at, type: 'BudgetRaised', data: { requestId: 'budget-1', limit: { usd: 2.5, tokens: null }, decidedBy: 'u' } } as never)).toBe('budget raised to $2.50 by u');
  });
});

group('decisions, time-outs and mail, in words (not their type names)', () => {
  const on = (type: string, data: Record<string, unknown>) => describe(event(`task-${taskId}`, type, data));
  it('who stopped a budget and why, a question nobody answered, who cancelled, what became of a mail', () => {
    expect(on('BudgetRefused', { requestId: 'budget-1', reason: 'too dear', decidedBy: 'ann', timedOut: false })).toBe('budget: stopped by ann: too dear');
    expect(on('BudgetRefused', { requestId: 'budget-1', reason: '', decidedBy: 'baton:deadline', timedOut: true })).toBe('budget: no decision before the deadline (stopped)');
    expect(on('ClarificationTimedOut', { requestId: 'clr-1' })).toBe('no answer before the deadline (the agent goes on with its best judgement)');
    expect(on('TaskCancelled', { reason: 'enough', requestedBy: 'ann' })).toBe('cancelled by ann: enough');
    expect(on('EmailRequested', { emailId: 'm', agentId: 'email-agent-1', toolUseId: 't', to: ['bo@example.com'], subject: 'The report', body: '', attachments: [] })).toBe('mail queued to bo@example.com: The report');
    expect(on('EmailSent', { emailId: 'm', messageId: '<a@b>', accepted: ['bo@example.com'], rejected: ['x@example.com'] })).toBe('mail sent (bo@example.com); refused: x@example.com');
    expect(on('EmailFailed', { emailId: 'm', code: 'not_sent_by_fork', message: 'its source sends it' })).toBe('mail not sent (not_sent_by_fork): its source sends it');
  });
});

group('what a screen reader is told of a task that changes on its own', () => {
  type Request = TaskView['pendingRequests'][number];
  const approval = { kind: 'approval', requestId: 'apr-1', agentId: 'lead', toolName: 'Task', input: { agent: 'researcher' }, plan: '', deadline: '2026-11-28T01:00:00.000Z', onTimeout: 'reject' } as unknown as Request;
  const question = { kind: 'clarification', requestId: 'clr-1', agentId: 'researcher-1', questions: ['Which sources?', 'How long?'] } as unknown as Request;
  const budget = { kind: 'budget', requestId: 'budget-1' } as unknown as Request;
  const at = (status: string, pendingRequests: Request[] = [], error: TaskView['error'] = null) => ({ status, pendingRequests, error }) as Pick<TaskView, 'status' | 'pendingRequests' | 'error'>;

  it('titles a request as its card does', () => {
    expect([requestTitle(approval), requestTitle({ ...approval, input: {} } as Request), requestTitle(question), requestTitle(budget)]).toEqual(['lead wants to call Task → researcher', 'lead wants to call Task', 'researcher-1 asks', 'The task reached its budget']);
  });

  it('says nothing of the first load (what the person opened is not news), nor of a change they would not act on', () => {
    expect(taskNews(null, at('awaiting_input', [approval]))).toBe('');
    expect(taskNews(at('running'), at('running'))).toBe('');
    expect(taskNews(at('awaiting_input', [approval]), at('awaiting_input', [approval]))).toBe('');
  });

  it('says the new status and each new request with what it asks; the end in words', () => {
    expect(taskNews(at('running'), at('awaiting_input', [approval, question]))).toBe('The task is now awaiting input. Waiting for your approval: lead wants to call Task → researcher. Waiting for your answer: researcher-1 asks Which sources? How long?');
    expect(taskNews(at('running'), at('running', [budget]))).toBe('Waiting for your decision: the task reached its budget.');
    expect(taskNews(at('running'), at('completed'))).toBe('The task completed.');
    expect(taskNews(at('running'), at('failed', [], { code: 'max_turns', message: 'the lead used its 20 turns' }))).toBe('The task failed: the lead used its 20 turns.');
    expect(taskNews(at('awaiting_input', [approval]), at('cancelled'))).toBe('The task was cancelled.');
  });
});

group('reportStart', () => {
  it('a long report is shown from its start, cut at a line near the limit, never through a character; a short one whole', () => {
    expect(reportStart('short', 10)).toBe('short');
    expect(reportStart(`${'a'.repeat(90)}\n${'b'.repeat(20)}`, 100)).toBe('a'.repeat(90));
    expect(reportStart(`${'a'.repeat(99)}😀${'b'.repeat(20)}`, 100)).toBe('a'.repeat(99));
  });
});
