import { fold, recordAs, taskStreamId, type DecidedEvent, type TaskState } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { triageToolUses, type TriageInput } from './loop.ts';
import { builtinTeams, type TeamDefinition } from './teams.ts';
import { codeSpan } from './tools.ts';

const TASK = '00000000-0000-4000-8000-000000000001';
const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const research = builtinTeams.research as TeamDefinition;

function stateOf(events: DecidedEvent[]): TaskState {
  return fold(events.map((e, i) => recordAs({ ...e, id: `e${i}` }, { taskId: TASK, streamId: taskStreamId(TASK), version: i + 1, position: BigInt(i + 1), recordedAt: new Date(Date.UTC(2026, 0, 1)) })));
}
const submitted = (requirePlanApproval: boolean): DecidedEvent => ({
  type: 'TaskSubmitted',
  data: { prompt: 'p', team: 'research', requirePlanApproval, approvalTimeoutSeconds: 60, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null },
});
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: research.lead.id, configVersion: 'v' } };
const turn = (agentId: string, uses: { id: string; name: string; input: Record<string, unknown> }[]): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: { agentId, turn: 1, model: 'm', content: uses.map((u) => ({ type: 'tool_use' as const, ...u })), stopReason: 'tool_use', usage, offline: true, durationMs: 0 },
});
const now = new Date(Date.UTC(2026, 0, 1));
const leadInput = (state: TaskState): TriageInput => ({ state, agentId: 'lead', team: research, def: research.lead, runsIn: 'orchestrator', now, plan: () => 'the plan' });

describe('triageToolUses (the one tool triage)', () => {
  it('the lead: unknown tools, bad input, sandbox tools and unknown agents are error results; ask_user asks; a delegation needs approval when the task says so', () => {
    const s = stateOf([submitted(true), started, turn('lead', [
      { id: 'a', name: 'write_file', input: { path: 'x', content: '' } },
      { id: 'b', name: 'nope', input: {} },
      { id: 'c', name: 'Task', input: { agent: 'researcher' } },
      { id: 'd', name: 'Task', input: { agent: 'ghost', prompt: 'p' } },
      { id: 'e', name: 'ask_user', input: { questions: ['Which?'] } },
      { id: 'f', name: 'Task', input: { agent: 'researcher', prompt: 'go' } },
    ])]);
    const t = triageToolUses(leadInput(s));
    expect(t.results.map((r) => [r.toolUseId, r.isError])).toEqual([['a', true], ['b', true], ['c', true], ['d', true], ['f', true]]);
    expect(t.results[0]?.content).toMatch(/not available to this agent/); // write_file is not one of the lead's tools
    expect(t.results[2]?.content).toMatch(/invalid input for Task: prompt/);
    expect(t.results[3]?.content).toMatch(/unknown agent 'ghost'; this team delegates to: researcher/);
    // A question in the same turn: nothing is delegated before the answer (it could change what to delegate).
    expect(t.results[4]?.content).toBe('not run: you asked the person in this turn (ask_user); make this call again once you have their answer');
    expect(t.asks).toEqual([expect.objectContaining({ type: 'RequestClarification', requestId: 'clr-lead-e', toolUseId: 'e', questions: ['Which?'], deadline: '2026-01-01T00:01:00.000Z' })]);
    expect(t.dispatches).toEqual([]);
    expect(t.runs).toEqual([]);
    // A question that is not asked (its input refused) holds nothing back.
    const badAsk = stateOf([submitted(false), started, turn('lead', [{ id: 'e', name: 'ask_user', input: { questions: [] } }, { id: 'f', name: 'Task', input: { agent: 'researcher', prompt: 'go' } }])]);
    expect(triageToolUses(leadInput(badAsk)).dispatches.map((d) => d.toolUseId)).toEqual(['f']);
    const delegating = stateOf([submitted(true), started, turn('lead', [{ id: 'f', name: 'Task', input: { agent: 'researcher', prompt: 'go' } }])]);
    expect(triageToolUses(leadInput(delegating)).asks).toEqual([expect.objectContaining({ type: 'RequestApproval', requestId: 'apr-lead-f', toolUseId: 'f', toolName: 'Task', plan: 'the plan', onTimeout: 'reject' })]);
  });

  it('the lead: without plan approval a delegation dispatches the next agent of that type; an approved one uses the approved input', () => {
    const s = stateOf([submitted(false), started, turn('lead', [{ id: 'a', name: 'Task', input: { agent: 'researcher', prompt: 'one' } }, { id: 'b', name: 'Task', input: { agent: 'researcher', prompt: 'two' } }])]);
    expect(triageToolUses(leadInput(s)).dispatches).toEqual([
      { type: 'DispatchSubagent', agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'a', prompt: 'one' },
      { type: 'DispatchSubagent', agentId: 'researcher-2', agentType: 'researcher', toolUseId: 'b', prompt: 'two' },
    ]);
    const asked = stateOf([submitted(true), started, turn('lead', [{ id: 'a', name: 'Task', input: { agent: 'researcher', prompt: 'one' } }]),
      { type: 'ApprovalRequested', data: { requestId: 'apr-lead-a', agentId: 'lead', toolUseId: 'a', toolName: 'Task', input: {}, inputDigest: 'd', plan: '', deadline: now.toISOString(), onTimeout: 'reject' } }]);
    expect(triageToolUses(leadInput(asked))).toMatchObject({ waiting: true, asks: [], dispatches: [], results: [] });
    const approved = stateOf([submitted(true), started, turn('lead', [{ id: 'a', name: 'Task', input: { agent: 'researcher', prompt: 'one' } }]),
      { type: 'ApprovalRequested', data: { requestId: 'apr-lead-a', agentId: 'lead', toolUseId: 'a', toolName: 'Task', input: {}, inputDigest: 'd', plan: '', deadline: now.toISOString(), onTimeout: 'reject' } },
      { type: 'ApprovalGranted', data: { requestId: 'apr-lead-a', input: { agent: 'researcher', prompt: 'edited' }, edited: true, decidedBy: 'u', agentId: 'lead' } }]);
    expect(triageToolUses(leadInput(approved)).dispatches).toEqual([{ type: 'DispatchSubagent', agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'a', prompt: 'edited' }]);
  });

  it('a subagent: its sandbox tools run here, the policy gates them, delegation is the lead\'s alone, a decided result is not asked again', () => {
    const team: TeamDefinition = { ...research, approvals: [{ agent: 'researcher', tool: 'write_file', require: 'always', onTimeout: 'approve' }] };
    const def = { ...(research.agents.researcher as TeamDefinition['lead']), tools: ['write_file', 'read_file', 'Task', 'bench_step'] };
    const base: DecidedEvent[] = [submitted(false), started, turn('lead', [{ id: 't', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }]),
      { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 't', prompt: 'p' } },
      { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r' } },
      turn('researcher-1', [
        { id: 'r1', name: 'read_file', input: { path: 'a.md' } },
        { id: 'w1', name: 'write_file', input: { path: 'b.md', content: 'x' } },
        { id: 'd1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } },
        { id: 'o1', name: 'bench_step', input: { step: 1 } },
      ])];
    const input = (state: TaskState): TriageInput => ({ state, agentId: 'researcher-1', team, def, runsIn: 'runner', now, plan: (c) => `wants ${c.name}` });
    const t = triageToolUses(input(stateOf(base)));
    expect(t.runs.map((r) => [r.call.id, r.input])).toEqual([['r1', { path: 'a.md' }]]);
    expect(t.asks).toEqual([expect.objectContaining({ type: 'RequestApproval', requestId: 'apr-researcher-1-w1', agentId: 'researcher-1', plan: 'wants write_file', onTimeout: 'approve' })]);
    expect(t.results.map((r) => [r.toolUseId, r.content])).toEqual([
      ['d1', "tool 'Task' delegates to another agent; only the lead delegates"],
      ['o1', "tool 'bench_step' runs in the orchestrator and is not available to this agent"],
    ]);
    const rejected = stateOf([...base,
      { type: 'ApprovalRequested', data: { requestId: 'apr-researcher-1-w1', agentId: 'researcher-1', toolUseId: 'w1', toolName: 'write_file', input: {}, inputDigest: 'd', plan: '', deadline: now.toISOString(), onTimeout: 'reject' } },
      { type: 'ApprovalRejected', data: { requestId: 'apr-researcher-1-w1', reason: 'no', decidedBy: 'u', agentId: 'researcher-1' } }]);
    const after = triageToolUses(input(rejected));
    expect(after.asks).toEqual([]);
    expect(after.runs.map((r) => r.call.id)).toEqual(['r1']); // w1 has its result (the rejection) in the state
  });
});

describe('submit_plan (the engineering lead)', () => {
  const engineering = builtinTeams.engineering as TeamDefinition;
  const planInput = (subtasks: Record<string, unknown>[]) => ({ summary: 'add a report', subtasks });
  const engStarted: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: engineering.lead.id, configVersion: 'v' } };
  const triage = (approval: boolean, input: Record<string, unknown>) =>
    triageToolUses({ state: stateOf([submitted(approval), engStarted, turn('lead', [{ id: 'p', name: 'submit_plan', input }])]), agentId: 'lead', team: engineering, def: engineering.lead, runsIn: 'orchestrator', now, plan: () => 'I will split it.' });

  it('one plan per turn: a second submit_plan of the turn is answered, not recorded (two had failed the turn on every retry, each paid again)', () => {
    const input = planInput([{ id: 'api', agent: 'backend-engineer', description: 'the API', file_locks: ['api/**'] }]);
    for (const approval of [false, true]) {
      const t = triageToolUses({ state: stateOf([submitted(approval), engStarted, turn('lead', [{ id: 'p1', name: 'submit_plan', input }, { id: 'p2', name: 'submit_plan', input }])]), agentId: 'lead', team: engineering, def: engineering.lead, runsIn: 'orchestrator', now, plan: () => 'I will split it.' });
      expect([...t.dispatches, ...t.asks].map((c) => ('toolUseId' in c ? c.toolUseId : null))).toEqual(['p1']);
      expect(t.results).toEqual([{ toolUseId: 'p2', toolName: 'submit_plan', content: 'not recorded: one plan per turn, and call p1 of this turn submitted it; its result is your plan\'s outcome', isError: true }]);
    }
  });

  it('the first valid plan of a turn is the plan: an invalid one before it is answered its errors, not named as the plan', () => {
    const good = planInput([{ id: 'api', agent: 'backend-engineer', description: 'the API', file_locks: ['api/**'] }]);
    const bad = planInput([{ id: 'api', agent: 'nobody', description: 'the API', file_locks: ['api/**'] }]);
    const t = triageToolUses({ state: stateOf([submitted(false), engStarted, turn('lead', [{ id: 'p1', name: 'submit_plan', input: bad }, { id: 'p2', name: 'submit_plan', input: good }])]), agentId: 'lead', team: engineering, def: engineering.lead, runsIn: 'orchestrator', now, plan: () => 'x' });
    expect(t.dispatches.map((c) => ('toolUseId' in c ? c.toolUseId : null))).toEqual(['p2']);
    expect(t.results.map((r) => r.toolUseId)).toEqual(['p1']);
    expect(t.results[0]?.content).not.toMatch(/one plan per turn/);
  });

  it('one review per turn: the reviewer\'s second submit_review of a turn is answered "not recorded" (both had been told "review recorded", and the last was kept)', () => {
    const reviewer = engineering.agents.reviewer as TeamDefinition['lead'];
    const verdict = (v: string, issues: unknown[] = []) => ({ verdict: v, issues, summary: 's' });
    const base: DecidedEvent[] = [submitted(false), engStarted, turn('lead', [{ id: 't', name: 'Task', input: { agent: 'reviewer', prompt: 'review' } }]),
      { type: 'SubagentDispatched', data: { agentId: 'reviewer-1', agentType: 'reviewer', toolUseId: 't', prompt: 'review' } },
      { type: 'SubagentStarted', data: { agentId: 'reviewer-1', attempt: 1, runnerId: 'r' } }];
    const triageOf = (uses: { id: string; input: Record<string, unknown> }[]) =>
      triageToolUses({ state: stateOf([...base, turn('reviewer-1', uses.map((u) => ({ ...u, name: 'submit_review' })))]), agentId: 'reviewer-1', team: engineering, def: reviewer, runsIn: 'runner', now, plan: () => 'x' });
    const t = triageOf([{ id: 'v1', input: verdict('approve') }, { id: 'v2', input: verdict('request_changes', [{ severity: 'major', message: 'no tests' }]) }]);
    expect(t.runs.map((r) => r.call.id)).toEqual(['v1']);
    expect(t.results).toEqual([{ toolUseId: 'v2', toolName: 'submit_review', content: 'not recorded: one review per turn, and call v1 of this turn recorded it (its verdict stands)', isError: true }]);
    // An invalid first call is answered its errors; the valid one after it is the verdict.
    const u = triageOf([{ id: 'v1', input: verdict('request_changes') }, { id: 'v2', input: verdict('approve') }]);
    expect(u.runs.map((r) => r.call.id)).toEqual(['v2']);
    expect(u.results.map((r) => [r.toolUseId, r.content])).toEqual([['v1', expect.stringMatching(/issues/)]]);
  });

  it("a plan's review naming a file no subtask holds is answered so, not recorded (it went to every subtask: a round of changes spent on nothing); the valid call after it is the verdict", () => {
    const reviewer = engineering.agents.reviewer as TeamDefinition['lead'];
    const base: DecidedEvent[] = [submitted(false), engStarted, turn('lead', [{ id: 'p', name: 'submit_plan', input: {} }]),
      { type: 'PlanRecorded', data: { agentId: 'lead', toolUseId: 'p', summary: 's', subtasks: [{ id: 'api', agent: 'backend-engineer', description: 'd', fileLocks: ['api/**'], dependsOn: [] }], reviewAgent: 'reviewer', maxReviewRounds: 1 } },
      { type: 'SubagentDispatched', data: { agentId: 'review-1', agentType: 'reviewer', toolUseId: 'p', prompt: 'review', role: 'review', round: 0, fileLocks: [] } },
      { type: 'SubagentStarted', data: { agentId: 'review-1', attempt: 1, runnerId: 'r' } }];
    const verdict = (file: string | null) => ({ verdict: 'request_changes', issues: [{ severity: 'major', file, message: 'no tests' }], summary: 's' });
    const t = triageToolUses({ state: stateOf([...base, turn('review-1', [{ id: 'v1', name: 'submit_review', input: verdict('web/x.ts') }, { id: 'v2', name: 'submit_review', input: verdict('api/x.ts') }])]), agentId: 'review-1', team: engineering, def: reviewer, runsIn: 'runner', now, plan: () => 'x' });
    expect(t.runs.map((r) => r.call.id)).toEqual(['v2']);
    expect(t.results).toEqual([{ toolUseId: 'v1', toolName: 'submit_review', content: "not recorded: issues.0.file 'web/x.ts' is no subtask's to change (their locks: api/**); name a file a subtask holds, or give no file for an issue about the change as a whole, and call submit_review again", isError: true }]);
    // An issue about no file is about the change as a whole: fine.
    const general = triageToolUses({ state: stateOf([...base, turn('review-1', [{ id: 'v3', name: 'submit_review', input: verdict(null) }])]), agentId: 'review-1', team: engineering, def: reviewer, runsIn: 'runner', now, plan: () => 'x' });
    expect(general.runs.map((r) => r.call.id)).toEqual(['v3']);
  });

  it('a valid plan is recorded (snake_case in, the domain\'s shape out) with the team\'s reviewer and rounds; with plan approval a person sees it first', () => {
    const input = planInput([
      { id: 'api', agent: 'backend-engineer', description: 'the API', file_locks: ['api/**'] },
      { id: 'web', agent: 'frontend-engineer', description: 'the view', file_locks: ['web/**'], depends_on: ['api'] },
    ]);
    expect(triage(false, input).dispatches).toEqual([
      {
        type: 'RecordPlan', agentId: 'lead', toolUseId: 'p', summary: 'add a report', reviewAgent: 'reviewer', maxReviewRounds: 1,
        subtasks: [
          { id: 'api', agent: 'backend-engineer', description: 'the API', fileLocks: ['api/**'], dependsOn: [] },
          { id: 'web', agent: 'frontend-engineer', description: 'the view', fileLocks: ['web/**'], dependsOn: ['api'] },
        ],
      },
    ]);
    const asked = triage(true, input);
    expect(asked.dispatches).toEqual([]);
    expect(asked.asks).toEqual([expect.objectContaining({ type: 'RequestApproval', toolName: 'submit_plan', plan: expect.stringMatching(/^I will split it\.\n\nPlan: add a report\n1\. `api` \[backend-engineer\] the API\n {3}locks: `api\/\*\*`\n2\. `web` .*after: `api`$/s) })]);
    expect([codeSpan('src/**'), codeSpan('a`b'), codeSpan('`x``')]).toEqual(['`src/**`', '``a`b``', '``` `x`` ```']);
  });

  it('an invalid plan goes back to the model as an error result naming each problem', () => {
    const t = triage(false, planInput([
      { id: 'a', agent: 'reviewer', description: 'x', file_locks: ['a/**'], depends_on: ['b'] },
      { id: 'b', agent: 'backend-engineer', description: 'y', file_locks: ['a/x.ts'], depends_on: ['a'] },
      { id: 'c', agent: 'designer', description: 'z', file_locks: ['c/**'], depends_on: ['nope'] },
    ]));
    expect(t.dispatches).toEqual([]);
    expect(t.results).toHaveLength(1);
    const msg = t.results[0]?.content ?? '';
    expect(t.results[0]?.isError).toBe(true);
    expect(msg).toMatch(/^invalid input for submit_plan: /);
    expect(msg).toMatch(/subtasks\.0\.agent: unknown agent 'reviewer'; this team's engineers: backend-engineer, frontend-engineer/);
    expect(msg).toMatch(/subtasks\.2\.agent: unknown agent 'designer'/);
    expect(msg).toMatch(/subtasks\.2\.depends_on\.0: unknown subtask 'nope'/);
    expect(msg).toMatch(/dependency cycle: a → b → a/);
    expect(triage(false, { summary: 'x', subtasks: [] }).results[0]?.content).toMatch(/^invalid input for submit_plan: subtasks: must have at least 1 item$/);
  });

  it('a subtask id that is not a plain name, and a field the tool does not know (a misspelt depends_on), are named errors, not dropped or passed on', () => {
    const msg = triage(false, { ...planInput([
      { id: '../x', agent: 'backend-engineer', description: 'x', file_locks: ['api/**'] },
      { id: 'b', agent: 'backend-engineer', description: 'y', file_locks: ['web/**'], dependsOn: ['a'] },
    ]), notes: 'extra' }).results[0]?.content ?? '';
    expect(msg).toMatch(/subtasks\.0\.id: lowercase letters, digits, - and _/);
    expect(msg).toMatch(/subtasks\.1\.dependsOn: unknown field 'dependsOn'/);
    expect(msg).toMatch(/notes: unknown field 'notes'/);
  });
});
