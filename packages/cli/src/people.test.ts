import type { ApiEvent } from '@baton/client';
import { describe, expect, it } from 'vitest';
import type { PlanView, TaskView } from '@baton/api';
import { planAcceptance, type SubtaskStatus } from '@baton/domain';
import { describeEvent, describePlan, describeRequest, describeTask } from './people.ts';

const taskId = '0b7c3f3e-4a51-4f4e-9d55-2d8f6f1c0a11';
const started = (streamId: string, position: number): ApiEvent =>
  ({ id: 'e', type: 'SubagentStarted', taskId, streamId, version: 1, position, recordedAt: '2026-11-26T16:00:00.000Z', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'vm-1' }, metadata: {} }) as unknown as ApiEvent;

describe('baton watch lines', () => {
  it('tells the two records of a subagent\'s start apart: the runner\'s claim on the task stream, then the fence on the agent\'s own stream', () => {
    expect(describeEvent(started(`task-${taskId}`, 9))).toBe('#9 v1 SubagentStarted researcher-1 attempt 1 on vm-1');
    expect(describeEvent(started(`agent-${taskId}-researcher-1`, 11))).toBe('#11 SubagentStarted researcher-1 attempt 1 on vm-1 (its own stream: an older attempt still running is fenced off)');
  });
  it('a request prints the command that decides it, unless it was closed before the watch began', () => {
    const asked = { id: 'e2', type: 'ClarificationRequested', taskId, streamId: `task-${taskId}`, version: 5, position: 22, recordedAt: '2026-11-26T16:00:00.000Z', data: { requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu1', questions: ['Which?'], context: '' }, metadata: {} } as unknown as ApiEvent;
    expect(describeEvent(asked).split('\n')).toEqual(['#22 v5 ClarificationRequested', '?  question clr-1 from lead', '   1. Which?', `   → baton answer ${taskId} '<answer>' --request clr-1`]);
    expect(describeEvent(asked, (id) => id === 'clr-1').split('\n').at(-1)).toBe('   (decided or closed since: no longer open)');
  });
  it('an event is one line, however many lines its prompt or summary has', () => {
    const event = (type: string, data: Record<string, unknown>) => ({ id: 'e3', type, taskId, streamId: `task-${taskId}`, version: 7, position: 30, recordedAt: '2026-11-26T16:00:00.000Z', data, metadata: {} }) as unknown as ApiEvent;
    expect(describeEvent(event('SubagentDispatched', { agentId: 'researcher-1', prompt: 'Find:\n- one\n\n- two' }))).toBe('#30 v7 SubagentDispatched researcher-1: Find: - one - two');
    expect(describeEvent(event('TaskCompleted', { summary: `Done.\n\n${'x'.repeat(400)}` }))).toBe(`#30 v7 TaskCompleted: Done. ${'x'.repeat(293)}…`);
  });
});

describe('describeRequest', () => {
  it('a budget request names the command with the limits the budget has, and only those', () => {
    const budget = (limit: { usd: number | null; tokens: number | null }) =>
      describeRequest('t-1', { kind: 'budget', requestId: 'budget-1', agentId: 'researcher-1', spent: { usd: 0.5, tokens: 3142 }, limit, deadline: '2026-11-26T19:18:27.302Z', onTimeout: 'stop', openedAt: '2026-11-26T19:08:27.302Z' });
    expect(budget({ usd: null, tokens: 3000 })).toContain("→ baton approve t-1 budget-1 --tokens <new limit>   |   baton reject t-1 budget-1 --reason '…'");
    expect(budget({ usd: 1, tokens: null })).toContain('→ baton approve t-1 budget-1 --usd <new limit>   |');
    expect(budget({ usd: 1, tokens: 3000 })).toContain('→ baton approve t-1 budget-1 --usd <new limit> --tokens <new limit>   |');
  });
});

describe('describeRequest: a question', () => {
  it('the command names the request (it works whatever else is open) and asks one answer per question', () => {
    const q = (questions: string[]) => describeRequest('t-1', { kind: 'clarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu1', questions, context: '', openedAt: '2026-11-26T19:08:27.302Z' });
    expect(q(['Which?'])).toContain("→ baton answer t-1 '<answer>' --request clr-1");
    expect(q(['Topic?', 'Audience?'])).toContain("→ baton answer t-1 '<answer 1>' '<answer 2>' --request clr-1");
  });
});

describe('describeRequest: an approval', () => {
  const approval = (plan: string) =>
    describeRequest('t-1', { kind: 'approval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu-1', toolName: 'submit_plan', input: { summary: 's' }, inputDigest: 'd', plan, deadline: '2026-11-26T19:18:27.302Z', onTimeout: 'reject', openedAt: '2026-11-26T19:08:27.302Z' }).split('\n');
  it('a plan of one line follows its label; a longer one is indented under it, blank lines left blank', () => {
    expect(approval('Research, then write.')[1]).toBe('   plan: Research, then write.');
    expect(approval('\nPlan: add an endpoint.\n\n1. backend\n   locks: api/**\n').slice(1, 6)).toEqual(['   plan:', '     Plan: add an endpoint.', '', '     1. backend', '        locks: api/**']);
    expect(approval('  indented first line\n  and the next')[1]).toBe('   plan:');
    expect(approval('  indented first line\n  and the next')[2]).toBe('       indented first line');
    expect(approval('')[1]).toBe('   input: {"summary":"s"}');
  });
});

describe('describeTask', () => {
  it("says why an agent failed, under the agent", () => {
    const agent = { id: 'researcher-1', type: 'researcher', role: 'delegation', status: 'failed', turns: 0, subtaskId: null, fileLocks: null, filesCreated: [], filesModified: [], filesDeleted: [], tests: null, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, error: { code: 'agent_lost', message: 'agent researcher-1 was started 5 times in a row' } };
    const engineer = { ...agent, id: 'backend', type: 'backend-engineer', status: 'completed', turns: 6, error: undefined, filesCreated: ['api/a.test.ts'], filesModified: ['api/a.ts'] };
    const fixer = { ...engineer, id: 'backend-fix1', filesCreated: [] };
    const task = { id: 't-1', status: 'running', version: 9, team: 'research', forkedFrom: null, prompt: 'p', agents: [agent, { ...agent, id: 'researcher-2', status: 'completed', turns: 1, error: undefined }, engineer, fixer], budget: null, pendingRequests: [], emails: [], result: null, error: null } as unknown as TaskView;
    expect(describeTask(task).split('\n').slice(2)).toEqual([
      '  agent researcher-1 (researcher): failed, 0 turns',
      '    error: agent_lost: agent researcher-1 was started 5 times in a row',
      '  agent researcher-2 (researcher): completed, 1 turn',
      // The files each agent created and changed (a fix round's agent only changes files).
      '  agent backend (backend-engineer): completed, 6 turns; created api/a.test.ts; modified api/a.ts',
      '  agent backend-fix1 (backend-engineer): completed, 6 turns; modified api/a.ts',
    ]);
    // A hundred files deleted: the first ten, and how many (before: all on one line).
    const sweeper = { ...engineer, id: 'sweeper', filesCreated: [], filesModified: [], filesDeleted: Array.from({ length: 100 }, (_, i) => `old/f${i}.ts`) };
    expect(describeTask({ ...task, agents: [sweeper] } as unknown as TaskView).split('\n')[2]).toBe(`  agent sweeper (backend-engineer): completed, 6 turns; deleted ${Array.from({ length: 10 }, (_, i) => `old/f${i}.ts`).join(', ')} and 90 more (100 in all)`);
  });
  it('says who cancelled it, when and why', () => {
    const task = { id: 't-1', status: 'cancelled', version: 4, team: 'research', forkedFrom: null, prompt: 'p', agents: [], budget: null, pendingRequests: [], emails: [], result: null, error: null, cancellation: { reason: 'no longer needed', requestedBy: 'key:abc…@acme', at: '2026-11-27T07:00:00.000Z' } } as unknown as TaskView;
    expect(describeTask(task).split('\n').slice(2)).toEqual(['  cancelled by key:abc…@acme at 2026-11-27T07:00:00.000Z: no longer needed']);
  });
  it("the agents' mail: sent (and to whom the server refused it), queued, or not sent and why — a completed task whose mail failed says so", () => {
    const mail = { emailId: '9dd771ab-0000-4000-8000-000000000001', agentId: 'email-agent-1', toolUseId: 'tu', to: ['reader@example.com'], subject: 'The report', attachments: [], status: 'sent', requestedAt: '', settledAt: '', messageId: '<m>', refused: [], error: null };
    const emails = [mail, { ...mail, emailId: 'aaaaaaaa-1', to: ['a@example.com', 'b@example.com'], refused: ['b@example.com'] }, { ...mail, emailId: 'bbbbbbbb-2', status: 'queued' }, { ...mail, emailId: 'cccccccc-3', status: 'failed', error: { code: 'mail_off', message: 'mail is off on this deployment (no SMTP_URL)' } }];
    const task = { id: 't-1', status: 'completed', version: 9, team: 'research', forkedFrom: null, prompt: 'p', agents: [], budget: null, pendingRequests: [], emails, result: { summary: 'Mail queued' }, error: null } as unknown as TaskView;
    expect(describeTask(task).split('\n').slice(2, 6)).toEqual([
      '  mail 9dd771ab from email-agent-1 to reader@example.com: "The report" — sent',
      '  mail aaaaaaaa from email-agent-1 to a@example.com, b@example.com: "The report" — sent, refused by the server for b@example.com',
      '  mail bbbbbbbb from email-agent-1 to reader@example.com: "The report" — queued',
      '  mail cccccccc from email-agent-1 to reader@example.com: "The report" — ! not sent (mail_off: mail is off on this deployment (no SMTP_URL))',
    ]);
  });
});

describe('baton status: a plan', () => {
  const subtask = (id: string, status: SubtaskStatus, failed: number | null, dependsOn: string[] = []): PlanView['subtasks'][number] => ({
    id, agent: 'backend-engineer', description: 'd', fileLocks: [`${id}/**`], dependsOn, status, agentIds: [id], summary: null, filesCreated: [], filesModified: [], filesDeleted: [], tests: failed === null ? null : { passed: 3, failed, skipped: 0 },
  });
  const plan = (o: Partial<PlanView>): PlanView => {
    const p = { summary: 'add a report', status: 'completed' as const, round: 1, maxReviewRounds: 1, reviewAgent: 'reviewer', subtasks: [subtask('api', 'done', 0), subtask('web', 'done', 2, ['api'])], reviews: [], ...o };
    return { ...p, acceptance: planAcceptance(p) };
  };
  const review = (verdict: 'approve' | 'request_changes', round: number) => ({ agentId: `review-${round + 1}`, round, verdict, issues: verdict === 'approve' ? [] : [{ severity: 'major' as const, file: 'web/a.ts', line: 3, message: 'm' }], summary: `round ${round}` });

  it('each subtask with its last tests, the review that stands, and what a completed task still leaves wrong', () => {
    expect(describePlan(plan({ reviews: [review('request_changes', 1)] }))).toEqual([
      '  plan: completed (after 1 round of changes): add a report',
      '    api [backend-engineer] done, tests 3 passed, 0 failed; locks api/**',
      '    web [backend-engineer] done, tests 3 passed, 2 failed; locks web/**; after api',
      '  review (review-2): request changes (1 issue): round 1',
      '  ! not accepted:',
      '  ! the last review (review-2) asked for changes (1 issue) and no round of changes was left (at most 1)',
      '  ! tests still fail in web (its last run)',
    ]);
    // Approved, every test passing: accepted, nothing marked.
    const ok = describePlan(plan({ round: 0, subtasks: [subtask('api', 'done', 0)], reviews: [review('approve', 1)] }));
    expect(ok.filter((l) => l.startsWith('  !'))).toEqual([]);
    expect(ok.at(-1)).toBe('  accepted');
    // While it runs, a review asking for changes is the next round's work and a failing test the first step of test-first: no warning.
    expect(describePlan(plan({ status: 'running', subtasks: [subtask('api', 'running', 1)], reviews: [review('request_changes', 1)] })).filter((l) => l.startsWith('  !'))).toEqual([]);
  });
});
