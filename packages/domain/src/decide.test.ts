import { given, recorded, stateOf } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import type { Command, DecidedEvent } from './commands.ts';
import { agentStreamId, isStepEvent, streamOf, taskStreamId } from './events.ts';
import { isStepCommand } from './commands.ts';
import { modelOutageOver, nextDeadline } from './state.ts';
import { CUT_OFF_TOOL_USE } from './evolve.ts';
import {
  IllegalTransitionError,
  InvalidCommandError,
  IdempotencyKeyReusedError,
  RequestAlreadyDecidedError,
  RequestNotFoundError,
  StaleAttemptError,
  TaskFinalError,
} from './errors.ts';

/** Build a command from event data (tests reuse the event fixtures as command payloads). */
const cmd = (type: Command['type'], data: unknown): Command => ({ type, ...(data as object) }) as Command;
const TASK = '00000000-0000-4000-8000-000000000001';
const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.01 };
const submitted: DecidedEvent = {
  type: 'TaskSubmitted',
  data: { prompt: 'research X', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null },
};
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } };
const leadTurn = (turn: number, toolUses: { id: string; name?: string; input?: Record<string, unknown> }[] = []): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: {
    agentId: 'lead',
    turn,
    model: 'm',
    content: [{ type: 'text', text: `turn ${turn}` }, ...toolUses.map((t) => ({ type: 'tool_use' as const, id: t.id, name: t.name ?? 'Task', input: t.input ?? { agent: 'researcher', prompt: 'p' } }))],
    stopReason: toolUses.length ? 'tool_use' : 'end_turn',
    usage,
    offline: true,
    durationMs: 1,
  },
});
const dispatched = (agentId = 'researcher-1', toolUseId = 'tu1'): DecidedEvent => ({ type: 'SubagentDispatched', data: { agentId, agentType: 'researcher', toolUseId, prompt: 'p' } });
const agentStarted = (agentId = 'researcher-1', attempt = 1): DecidedEvent => ({ type: 'SubagentStarted', data: { agentId, attempt, runnerId: 'r1' } });
/** A subagent's turn (on its own stream in the log; the fold does not mind where). */
const agentTurn = (agentId: string, turn: number, toolUses: { id: string; name?: string; input?: Record<string, unknown> }[] = []): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: { ...(leadTurn(turn, toolUses.map((t) => ({ name: 'write_file', input: { path: 'a.md', content: 'x' }, ...t }))).data as object), agentId } as never,
});
const agentCompleted = (agentId = 'researcher-1', attempt = 1): DecidedEvent => ({
  type: 'SubagentCompleted',
  data: { agentId, attempt, summary: 'found things', filesCreated: ['notes.md'], filesModified: [], success: true, iterationCapReached: false },
});
const approvalRequested: DecidedEvent = {
  type: 'ApprovalRequested',
  data: { requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'plan', deadline: '2026-01-01T01:00:00.000Z', onTimeout: 'reject' },
};
const clarificationRequested: DecidedEvent = {
  type: 'ClarificationRequested',
  data: { requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu1', questions: ['What?'], context: 'vague' },
};
const running = [submitted, started];
const leadWaitingOnTool = [...running, leadTurn(1, [{ id: 'tu1' }])];

describe('SubmitTask', () => {
  it('records TaskSubmitted on a new task → pending', () => {
    const s = given([]).when(cmd('SubmitTask', submitted.data)).then([submitted]);
    expect(s.status).toBe('pending');
  });
  it('is illegal once the task exists', () => {
    given([submitted]).when(cmd('SubmitTask', submitted.data)).thenThrows(IllegalTransitionError, /already exists/);
  });
});

describe('StartTask', () => {
  it('pending → running', () => {
    expect(given([submitted]).when(cmd('StartTask', started.data)).then([started]).status).toBe('running');
  });
  it('is illegal before submission, twice, or after the end', () => {
    given([]).when(cmd('StartTask', started.data)).thenThrows(IllegalTransitionError, /not submitted/);
    given(running).when(cmd('StartTask', started.data)).thenThrows(IllegalTransitionError, /already started/);
    given([...running, { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } }]).when(cmd('StartTask', started.data)).thenThrows(TaskFinalError);
  });
});

describe('RecordModelTurn', () => {
  it('a lead turn with tool uses opens them; usage adds up', () => {
    const s = given(running).when(cmd('RecordModelTurn', leadTurn(1, [{ id: 'tu1' }]).data)).then([leadTurn(1, [{ id: 'tu1' }])]);
    expect(s.lead?.phase).toBe('tools');
    expect(s.lead?.openToolUses.map((t) => t.toolUseId)).toEqual(['tu1']);
    expect(s.usage.inputTokens).toBe(10);
  });
  it('a lead turn without tool uses gives the final answer', () => {
    const s = given(running).when(cmd('RecordModelTurn', leadTurn(1).data)).then([leadTurn(1)]);
    expect(s.lead?.phase).toBe('done');
    expect(s.lead?.finalText).toBe('turn 1');
  });
  it('the stop reason: tool uses are never dropped (opened whatever it says); the last of an answer cut at max_tokens is answered as not run; pause_turn goes on; a refusal ends refused', () => {
    const turn = (stopReason: string, ids: string[], text = 'said'): DecidedEvent => {
      const e = leadTurn(1, ids.map((id) => ({ id })));
      const data = e.data as { content: unknown[] };
      return { ...e, data: { ...e.data, stopReason, content: [{ type: 'text', text }, ...data.content.filter((b) => (b as { type: string }).type === 'tool_use')] } } as DecidedEvent;
    };
    const after = (e: DecidedEvent) => stateOf(recorded([...running, e])).lead!;
    expect(after(turn('end_turn', ['a'])).openToolUses.map((t) => [t.toolUseId, t.state])).toEqual([['a', 'pending']]);
    const cut = after(turn('max_tokens', ['a', 'b']));
    expect(cut.phase).toBe('tools');
    expect(cut.openToolUses.map((t) => [t.toolUseId, t.state, t.result?.isError ?? null])).toEqual([['a', 'pending', null], ['b', 'resolved', true]]);
    expect(cut.openToolUses[1]?.result?.content).toBe(CUT_OFF_TOOL_USE);
    expect(after(turn('max_tokens', [], 'half an answ'))).toMatchObject({ phase: 'done', finalText: 'half an answ\n[cut off at the max_tokens limit]' });
    expect(after(turn('pause_turn', []))).toMatchObject({ phase: 'model', turns: 1, openToolUses: [] });
    expect(after(turn('refusal', ['a'], 'I cannot help with that'))).toMatchObject({ phase: 'done', refused: true, finalText: 'I cannot help with that', openToolUses: [] });
    expect(after(turn('end_turn', []))).not.toHaveProperty('refused');
  });
  it('is illegal while the lead waits on tools, out of order, or for an agent that is not running', () => {
    given(leadWaitingOnTool).when(cmd('RecordModelTurn', leadTurn(2).data)).thenThrows(IllegalTransitionError, /not due a model turn/);
    given(running).when(cmd('RecordModelTurn', leadTurn(3).data)).thenThrows(InvalidCommandError, /does not follow/);
    const sub = { ...(leadTurn(1).data as object), agentId: 'researcher-1' };
    given([...leadWaitingOnTool, dispatched()]).when(cmd('RecordModelTurn', sub)).thenThrows(IllegalTransitionError, /dispatched/);
    given(running).when(cmd('RecordModelTurn', sub)).thenThrows(InvalidCommandError, /no agent/);
  });
  it('a subagent turn moves its own loop: tool uses open, then its final answer', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted()];
    const s = given(hist).when(cmd('RecordModelTurn', agentTurn('researcher-1', 1, [{ id: 'w1' }]).data)).then([agentTurn('researcher-1', 1, [{ id: 'w1' }])]);
    expect(s.agents['researcher-1']).toMatchObject({ phase: 'tools', turns: 1, openToolUses: [{ toolUseId: 'w1', state: 'pending' }] });
    given([...hist, agentTurn('researcher-1', 1, [{ id: 'w1' }])]).when(cmd('RecordModelTurn', agentTurn('researcher-1', 2).data)).thenThrows(IllegalTransitionError, /not due a model turn \(phase tools\)/);
    const results = [{ toolUseId: 'w1', toolName: 'write_file', content: 'created a.md', isError: false }];
    const s2 = given([...hist, agentTurn('researcher-1', 1, [{ id: 'w1' }])]).when({ type: 'RecordToolResults', agentId: 'researcher-1', results, attempt: 1 }).then([{ type: 'ToolResultsRecorded', data: { agentId: 'researcher-1', results } }]);
    expect(s2.agents['researcher-1']).toMatchObject({ phase: 'model', openToolUses: [] });
    const s3 = given([...hist, agentTurn('researcher-1', 1, [{ id: 'w1' }]), { type: 'ToolResultsRecorded', data: { agentId: 'researcher-1', results } }]).when(cmd('RecordModelTurn', agentTurn('researcher-1', 2).data)).state();
    expect(s3.agents['researcher-1']).toMatchObject({ phase: 'done', turns: 2, finalText: 'turn 2' });
  });
  it('a subagent write names its attempt: an older attempt is fenced off', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1), agentStarted('researcher-1', 2)];
    given(hist).when({ ...cmd('RecordModelTurn', agentTurn('researcher-1', 1).data), attempt: 1 } as Command).thenThrows(StaleAttemptError);
    given(hist).when({ ...cmd('RecordModelTurn', agentTurn('researcher-1', 1).data), attempt: 2 } as Command).then([agentTurn('researcher-1', 1)]);
    const withUse = [...hist, agentTurn('researcher-1', 1, [{ id: 'w1' }])];
    given(withUse).when({ type: 'RecordToolResults', agentId: 'researcher-1', results: [{ toolUseId: 'w1', toolName: 'write_file', content: '', isError: false }], attempt: 1 }).thenThrows(StaleAttemptError);
    given(withUse).when({ type: 'RecordToolResults', agentId: 'researcher-1', results: [{ toolUseId: 'zz', toolName: 'write_file', content: '', isError: false }], attempt: 2 }).thenThrows(InvalidCommandError, /not open on agent/);
  });
  it('the started attempt claims the agent stream; any other attempt cannot', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)];
    given(hist).when({ type: 'ClaimAgentStream', agentId: 'researcher-1', attempt: 1, runnerId: 'r1' }).then([agentStarted('researcher-1', 1)]);
    given(hist).when({ type: 'ClaimAgentStream', agentId: 'researcher-1', attempt: 2, runnerId: 'r1' }).thenThrows(StaleAttemptError);
    given([...leadWaitingOnTool, dispatched()]).when({ type: 'ClaimAgentStream', agentId: 'researcher-1', attempt: 0, runnerId: 'r1' }).thenThrows(StaleAttemptError);
  });
  it("a fence that commits after the task was cancelled (the claim before the cancel, the fence after) does not bring the agent back to running; a stale fence does not move the attempt back", () => {
    const claimed = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)];
    const cancelled = stateOf(recorded([...claimed, { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } } as DecidedEvent, agentStarted('researcher-1', 1)]));
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.agents['researcher-1']).toMatchObject({ status: 'cancelled', attempt: 1 });
    const newer = stateOf(recorded([...claimed, agentStarted('researcher-1', 2), agentStarted('researcher-1', 1)]));
    expect(newer.agents['researcher-1']).toMatchObject({ status: 'running', attempt: 2 });
  });
  it('a subagent turn counts on the agent and on the task usage', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted()];
    const turn = { ...(leadTurn(1).data as object), agentId: 'researcher-1' };
    const s = given(hist).when(cmd('RecordModelTurn', turn)).then([{ type: 'ModelTurnRecorded', data: turn as never }]);
    expect(s.usage.inputTokens).toBe(20);
  });
});

describe('RecordToolResults', () => {
  it('resolving every open tool use makes the lead due a turn', () => {
    const results = [{ toolUseId: 'tu1', toolName: 'bench_step', content: 'ok', isError: false }];
    const s = given(leadWaitingOnTool).when({ type: 'RecordToolResults', agentId: 'lead', results }).then([{ type: 'ToolResultsRecorded', data: { agentId: 'lead', results } }]);
    expect(s.lead?.phase).toBe('model');
    expect(s.lead?.openToolUses).toEqual([]);
  });
  it('rejects results for tool uses that are not open, and empty results', () => {
    given(leadWaitingOnTool).when({ type: 'RecordToolResults', agentId: 'lead', results: [{ toolUseId: 'nope', toolName: 'x', content: '', isError: false }] }).thenThrows(InvalidCommandError, /not open/);
    given(leadWaitingOnTool).when({ type: 'RecordToolResults', agentId: 'lead', results: [] }).thenThrows(InvalidCommandError, /no tool results/);
  });
});

describe('subagents', () => {
  it('dispatch → start → complete resolves the lead tool use with the summary', () => {
    let s = given(leadWaitingOnTool).when(cmd('DispatchSubagent', dispatched().data)).then([dispatched()]);
    expect(s.agents['researcher-1']?.status).toBe('dispatched');
    expect(s.lead?.openToolUses[0]?.state).toBe('dispatched');
    s = given([...leadWaitingOnTool, dispatched()]).when(cmd('StartSubagent', agentStarted().data)).then([agentStarted()]);
    expect(s.agents['researcher-1']?.status).toBe('running');
    s = given([...leadWaitingOnTool, dispatched(), agentStarted()]).when(cmd('CompleteSubagent', agentCompleted().data)).then([agentCompleted()]);
    expect(s.agents['researcher-1']).toMatchObject({ status: 'completed', filesCreated: ['notes.md'], summary: 'found things' });
    expect(s.lead?.openToolUses[0]).toMatchObject({ state: 'resolved', result: { isError: false } });
    expect(JSON.parse(s.lead?.openToolUses[0]?.result?.content ?? '{}')).toMatchObject({ summary: 'found things', filesCreated: ['notes.md'] });
  });
  it('a deleted file (DeleteFile → FileDeleted) leaves the artifacts and joins deletedFiles until stored again; the agent and the lead are told', () => {
    const stored = (path: string): DecidedEvent => ({ type: 'ArtifactStored', data: { agentId: 'researcher-1', path, bytes: 1, sha256: 'a'.repeat(64), mediaType: 'text/plain' } });
    const deleted = (path: string): DecidedEvent => ({ type: 'FileDeleted', data: { agentId: 'researcher-1', path } });
    const base = [...leadWaitingOnTool, dispatched(), agentStarted(), stored('old.md'), stored('keep.md')];
    let s = given(base).when({ type: 'DeleteFile', agentId: 'researcher-1', path: 'old.md' }).then([deleted('old.md')]);
    expect(s.artifacts.map((a) => a.path)).toEqual(['keep.md']);
    s = stateOf(recorded([...base, deleted('old.md'), deleted('README.md'), deleted('old.md')]));
    expect(s.deletedFiles).toEqual(['README.md', 'old.md']);
    s = stateOf(recorded([...base, deleted('old.md'), deleted('README.md'), stored('README.md')]));
    expect(s.deletedFiles).toEqual(['old.md']);
    expect(s.artifacts.map((a) => a.path)).toEqual(['keep.md', 'README.md']);
    const done = { ...agentCompleted(), data: { ...agentCompleted().data, filesDeleted: ['old.md'] } } as DecidedEvent;
    s = stateOf(recorded([...base, deleted('old.md'), done]));
    expect(s.agents['researcher-1']?.filesDeleted).toEqual(['old.md']);
    expect(JSON.parse(s.lead?.openToolUses[0]?.result?.content ?? '{}')).toMatchObject({ filesDeleted: ['old.md'] });
    given(running).when({ type: 'DeleteFile', agentId: 'nobody', path: 'x' }).thenThrows(Error);
  });
  it('a takeover is a new attempt; the superseded attempt can no longer complete', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)];
    const s = given(hist).when({ type: 'StartSubagent', agentId: 'researcher-1', attempt: 2, runnerId: 'r2' }).then([{ type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 2, runnerId: 'r2' } }]);
    expect(s.agents['researcher-1']?.attempt).toBe(2);
    given([...hist, agentStarted('researcher-1', 2)]).when(cmd('CompleteSubagent', agentCompleted('researcher-1', 1).data)).thenThrows(StaleAttemptError, /superseded by attempt 2/);
    given(hist).when({ type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'r2' }).thenThrows(StaleAttemptError);
  });
  it('counts attempts in a row lost before recording anything: the claim counts, its fence does not, a turn or a result resets', () => {
    const fence = (attempt: number): DecidedEvent => agentStarted('researcher-1', attempt); // the same event, on the agent's stream
    const stalled = (hist: DecidedEvent[]) => stateOf(recorded(hist)).agents['researcher-1']?.stalledAttempts;
    const base = [...leadWaitingOnTool, dispatched()];
    expect(stalled(base)).toBe(0);
    expect(stalled([...base, agentStarted('researcher-1', 1), fence(1)])).toBe(1);
    expect(stalled([...base, agentStarted('researcher-1', 1), fence(1), agentStarted('researcher-1', 2), fence(2), agentStarted('researcher-1', 3)])).toBe(3);
    const progressed = [...base, agentStarted('researcher-1', 1), agentStarted('researcher-1', 2), agentTurn('researcher-1', 1, [{ id: 'w1' }])];
    expect(stalled(progressed)).toBe(0);
    expect(stalled([...progressed, agentStarted('researcher-1', 3)])).toBe(1);
    const results: DecidedEvent = { type: 'ToolResultsRecorded', data: { agentId: 'researcher-1', results: [{ toolUseId: 'w1', toolName: 'write_file', content: 'ok', isError: false }] } };
    expect(stalled([...progressed, agentStarted('researcher-1', 3), results])).toBe(0);
  });
  it('an attempt its stopping runner handed back does not count as lost; only the current attempt of a running agent can be handed back', () => {
    const handedBack = (attempt: number): DecidedEvent => ({ type: 'SubagentHandedBack', data: { agentId: 'researcher-1', attempt, runnerId: 'r1', reason: 'its runner stopped (a graceful shutdown)' } });
    const stalled = (hist: DecidedEvent[]) => stateOf(recorded(hist)).agents['researcher-1']?.stalledAttempts;
    const base = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)];
    given(base).when({ type: 'HandBackSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'r1', reason: 'its runner stopped (a graceful shutdown)' }).then([handedBack(1)]);
    given(base).when({ type: 'HandBackSubagent', agentId: 'researcher-1', attempt: 2, runnerId: 'r1', reason: 'x' }).thenThrows(StaleAttemptError);
    given([...base, agentStarted('researcher-1', 2)]).when({ type: 'HandBackSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'r1', reason: 'x' }).thenThrows(StaleAttemptError);
    // Once per attempt: a second hand-back is refused, and a repeated event changes nothing.
    given([...base, handedBack(1)]).when({ type: 'HandBackSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'r1', reason: 'x' }).thenThrows(IllegalTransitionError, /handed back already/);
    expect(stalled([...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1), agentStarted('researcher-1', 2), handedBack(2), handedBack(2)])).toBe(1);
    // Six deployments in a row, each interrupting the same long model call: nothing is counted as lost.
    const deployments = [...leadWaitingOnTool, dispatched()];
    for (let n = 1; n <= 6; n++) deployments.push(agentStarted('researcher-1', n), handedBack(n));
    expect(stalled(deployments)).toBe(0);
    expect(stateOf(recorded(deployments)).agents['researcher-1']).toMatchObject({ status: 'running', attempt: 6 });
    // A crash is still a loss: attempts lost in a row count around a hand-back.
    expect(stalled([...base, agentStarted('researcher-1', 2), handedBack(2), agentStarted('researcher-1', 3)])).toBe(2);
  });
  it("a model call the API could not answer is recorded while the agent is due a turn (its attempt current); the first since its last turn starts its outage, its turn ends it", () => {
    const unavailable = (agentId: string, error = '529 overloaded'): DecidedEvent => ({ type: 'ModelUnavailable', data: { agentId, error } });
    const base = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)];
    given(base).when({ type: 'RecordModelUnavailable', agentId: 'researcher-1', attempt: 1, error: '529 overloaded' }).then([unavailable('researcher-1')]);
    given(base).when({ type: 'RecordModelUnavailable', agentId: 'researcher-1', attempt: 2, error: 'x' }).thenThrows(StaleAttemptError);
    given(running).when({ type: 'RecordModelUnavailable', agentId: 'lead', error: '503' }).then([unavailable('lead', '503')]);
    // The lead waits on its tool call: no model call is due, so none can have failed.
    given(leadWaitingOnTool).when({ type: 'RecordModelUnavailable', agentId: 'lead', error: 'x' }).thenThrows(IllegalTransitionError, /not due a model turn/);
    // Events recorded a second apart (recorded()): the outage keeps its first time, counts each failure, keeps the last words.
    const outage = (hist: DecidedEvent[]) => stateOf(recorded(hist)).agents['researcher-1']?.modelOutage;
    expect(outage(base)).toBeUndefined();
    const twice = [...base, unavailable('researcher-1', 'first'), agentStarted('researcher-1', 2), unavailable('researcher-1', 'second')];
    expect(outage(twice)).toEqual({ since: '2026-01-01T00:00:06.000Z', failures: 2, error: 'second' });
    expect(outage([...twice, agentTurn('researcher-1', 1, [{ id: 'w1' }])])).toBeUndefined();
    expect(stateOf(recorded([...running, unavailable('lead')])).lead?.modelOutage).toEqual({ since: '2026-01-01T00:00:03.000Z', failures: 1, error: '529 overloaded' });
    // Given up once the outage has lasted the limit (never without one).
    const since = { modelOutage: { since: '2026-01-01T00:00:00.000Z', failures: 3, error: 'x' } };
    expect(modelOutageOver(since, new Date('2026-01-01T00:14:59.999Z'), 900_000)).toBe(false);
    expect(modelOutageOver(since, new Date('2026-01-01T00:15:00.000Z'), 900_000)).toBe(true);
    expect(modelOutageOver(since, new Date('2027-01-01T00:00:00.000Z'), undefined)).toBe(false);
    expect(modelOutageOver({}, new Date('2027-01-01T00:00:00.000Z'), 1000)).toBe(false);
    // A step: on the agent's own stream (the lead's on the task stream), never relayed.
    expect(streamOf(TASK, unavailable('researcher-1'), 'lead')).toBe(agentStreamId(TASK, 'researcher-1'));
    expect(streamOf(TASK, unavailable('lead'), 'lead')).toBe(taskStreamId(TASK));
    expect(isStepCommand({ type: 'RecordModelUnavailable' })).toBe(true);
  });
  it('an agent that gave its final answer may be reminded once (its attempt current): a model turn is due again, the reminder a step on its stream', () => {
    const reminded = (agentId: string): DecidedEvent => ({ type: 'AgentReminded', data: { agentId, text: 'call submit_review' } });
    const answered = [...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1), agentTurn('researcher-1', 1)];
    const s = given(answered).when({ type: 'RemindAgent', agentId: 'researcher-1', attempt: 1, text: 'call submit_review' }).then([reminded('researcher-1')]);
    expect(s.agents['researcher-1']).toMatchObject({ phase: 'model', finalText: null, reminders: 1, turns: 1 });
    // Its next turn follows on; a second reminder is refused, as is one before a final answer, of an older attempt, or after a refusal.
    given([...answered, reminded('researcher-1')]).when(cmd('RecordModelTurn', agentTurn('researcher-1', 2).data)).then([agentTurn('researcher-1', 2)]);
    given([...answered, reminded('researcher-1'), agentTurn('researcher-1', 2)]).when({ type: 'RemindAgent', agentId: 'researcher-1', text: 'again' }).thenThrows(IllegalTransitionError, /reminded already \(at most 1\)/);
    given([...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1)]).when({ type: 'RemindAgent', agentId: 'researcher-1', text: 'x' }).thenThrows(IllegalTransitionError, /not given a final answer to be reminded after \(phase model\)/);
    given(answered).when({ type: 'RemindAgent', agentId: 'researcher-1', attempt: 2, text: 'x' }).thenThrows(StaleAttemptError);
    const refusal: DecidedEvent = { type: 'ModelTurnRecorded', data: { ...(agentTurn('researcher-1', 1).data as object), stopReason: 'refusal' } as never };
    given([...leadWaitingOnTool, dispatched(), agentStarted('researcher-1', 1), refusal]).when({ type: 'RemindAgent', agentId: 'researcher-1', text: 'x' }).thenThrows(IllegalTransitionError, /refused/);
    given([...running, leadTurn(1)]).when({ type: 'RemindAgent', agentId: 'lead', text: 'call submit_review' }).then([reminded('lead')]);
    expect(streamOf(TASK, reminded('researcher-1'), 'lead')).toBe(agentStreamId(TASK, 'researcher-1'));
    expect(isStepCommand({ type: 'RemindAgent' })).toBe(true);
    expect(isStepEvent('AgentReminded')).toBe(true);
  });
  it('illegal: dispatching a tool use twice, an unknown tool use, a duplicate agent id, completing a dispatched agent', () => {
    const hist = [...leadWaitingOnTool, dispatched()];
    given(hist).when(cmd('DispatchSubagent', dispatched('researcher-2').data)).thenThrows(IllegalTransitionError, /is dispatched/);
    given(leadWaitingOnTool).when(cmd('DispatchSubagent', dispatched('researcher-1', 'zz').data)).thenThrows(InvalidCommandError, /not open/);
    given(hist).when(cmd('CompleteSubagent', agentCompleted().data)).thenThrows(IllegalTransitionError, /is dispatched/);
  });
  it('a failed subagent resolves its tool use as an error result', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted()];
    const s = given(hist).when({ type: 'FailSubagent', agentId: 'researcher-1', code: 'job_failed', message: 'boom' }).then([{ type: 'SubagentFailed', data: { agentId: 'researcher-1', code: 'job_failed', message: 'boom' } }]);
    expect(s.agents['researcher-1']?.status).toBe('failed');
    expect(s.lead?.openToolUses[0]?.result).toMatchObject({ isError: true });
    given([...hist, { type: 'SubagentFailed', data: { agentId: 'researcher-1', code: 'x', message: 'y' } }]).when({ type: 'FailSubagent', agentId: 'researcher-1', code: 'x', message: 'y' }).thenThrows(IllegalTransitionError, /is failed/);
  });
});

describe('approvals', () => {
  const waiting = [...leadWaitingOnTool, approvalRequested];
  it('a request opens → awaiting_input; approve closes it and clears the tool use to run', () => {
    const s0 = given(leadWaitingOnTool).when(cmd('RequestApproval', approvalRequested.data)).then([approvalRequested]);
    expect(s0.status).toBe('awaiting_input');
    expect(Object.values(s0.pendingRequests)).toEqual([expect.objectContaining({ kind: 'approval', requestId: 'apr-1', toolName: 'Task', plan: 'plan' })]);
    const s = given(waiting).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', decidedBy: 'u' }).then([
      { type: 'ApprovalGranted', data: { requestId: 'apr-1', input: { agent: 'researcher', prompt: 'p' }, edited: false, decidedBy: 'u', agentId: 'lead' } },
    ]);
    expect(s.status).toBe('running');
    expect(s.lead?.openToolUses[0]).toMatchObject({ state: 'pending', approvedInput: { agent: 'researcher', prompt: 'p' } });
  });
  it('approve with edited input records the edit', () => {
    const edited = { agent: 'researcher', prompt: 'narrower' };
    const s = given(waiting).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', input: edited, decidedBy: 'u' }).then([
      { type: 'ApprovalGranted', data: { requestId: 'apr-1', input: edited, edited: true, decidedBy: 'u', agentId: 'lead' } },
    ]);
    expect(s.lead?.openToolUses[0]?.approvedInput).toEqual(edited);
  });
  it('reject resolves the tool use with a result the model sees', () => {
    const s = given(waiting).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'reject', reason: 'too broad', decidedBy: 'u' }).then([
      { type: 'ApprovalRejected', data: { requestId: 'apr-1', reason: 'too broad', decidedBy: 'u', agentId: 'lead' } },
    ]);
    expect(s.lead?.openToolUses[0]?.result?.content).toBe('The user rejected the plan: too broad');
  });
  it('deciding twice: the second decision is refused, naming the first', () => {
    const decided = [...waiting, { type: 'ApprovalRejected', data: { requestId: 'apr-1', reason: 'no', decidedBy: 'u' } } as DecidedEvent];
    given(decided).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', decidedBy: 'v' }).thenThrows(RequestAlreadyDecidedError, /already decided: rejected: no \(by u at /);
  });
  it('a decision sent again under its Idempotency-Key records nothing and is no refusal; the key with another decision is refused; without the key, or with another, a decided request is refused naming who decided', () => {
    const edited = { type: 'ApprovalGranted', data: { requestId: 'apr-1', input: { agent: 'researcher', prompt: 'narrow' }, edited: true, decidedBy: 'key:ab12cd34@acme', idempotencyKey: 'k1' } } as DecidedEvent;
    const approved = [...waiting, edited];
    const again = { type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', input: { prompt: 'narrow', agent: 'researcher' }, decidedBy: 'key:ab12cd34@acme' } as const;
    given(approved).when({ ...again, idempotencyKey: 'k1' }).then([]);
    given(approved).when({ ...again, input: { agent: 'researcher', prompt: 'wider' }, idempotencyKey: 'k1' }).thenThrows(IdempotencyKeyReusedError, /already used for another decision of request 'apr-1' \(approved with edits\)/);
    // Another click, by the same key's holder or anyone: the request is decided already, and by whom.
    given(approved).when(again).thenThrows(RequestAlreadyDecidedError, /approved with edits \(by key:ab12cd34@acme at /);
    given(approved).when({ ...again, idempotencyKey: 'k2' }).thenThrows(RequestAlreadyDecidedError);
    const rejected = [...waiting, { type: 'ApprovalRejected', data: { requestId: 'apr-1', reason: 'no', decidedBy: 'u', idempotencyKey: 'k3' } } as DecidedEvent];
    given(rejected).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'reject', reason: 'no', decidedBy: 'u', idempotencyKey: 'k3' }).then([]);
    // A budget raise sent again under its key: the measures it names as raised (the others kept theirs).
    const raised = [...waiting, { type: 'BudgetRaised', data: { requestId: 'apr-1', limit: { usd: 5, tokens: 100_000 }, decidedBy: 'u', resumes: [], idempotencyKey: 'k4' } } as DecidedEvent];
    given(raised).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', budget: { tokens: 100_000 }, decidedBy: 'u', idempotencyKey: 'k4' }).then([]);
    given(raised).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', budget: { tokens: 200_000 }, decidedBy: 'u', idempotencyKey: 'k4' }).thenThrows(IdempotencyKeyReusedError);
    const timedOut = [...waiting, { type: 'ApprovalTimedOut', data: { requestId: 'apr-1', action: 'reject' } } as DecidedEvent];
    given(timedOut).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'reject', reason: 'no', decidedBy: 'u', idempotencyKey: 'k3' }).thenThrows(RequestAlreadyDecidedError, /timed out \(rejected\) \(by its deadline at /);
  });
  it('unknown request, a clarification answered as an approval, or a final task are refused', () => {
    given(waiting).when({ type: 'DecideApproval', requestId: 'nope', decision: 'approve', decidedBy: 'u' }).thenThrows(RequestNotFoundError);
    // A name every object inherits is no request (it read as one already decided, "undefined").
    for (const requestId of ['constructor', 'toString', '__proto__']) {
      given(waiting).when({ type: 'DecideApproval', requestId, decision: 'approve', decidedBy: 'u' }).thenThrows(RequestNotFoundError);
      given(waiting).when({ type: 'AnswerClarification', requestId, answers: ['x'], answeredBy: 'u' }).thenThrows(RequestNotFoundError);
    }
    given([...leadWaitingOnTool, clarificationRequested]).when({ type: 'DecideApproval', requestId: 'clr-1', decision: 'approve', decidedBy: 'u' }).thenThrows(InvalidCommandError, /not an approval/);
    given([...leadWaitingOnTool, { type: 'TaskFailed', data: { code: 'x', message: 'y' } }]).when({ type: 'DecideApproval', requestId: 'apr-1', decision: 'approve', decidedBy: 'u' }).thenThrows(TaskFinalError);
  });
  it('a timeout rejects (default) and is a no-op once decided', () => {
    const s = given(waiting).when({ type: 'TimeOutApproval', requestId: 'apr-1' }).then([{ type: 'ApprovalTimedOut', data: { requestId: 'apr-1', action: 'reject', agentId: 'lead' } }]);
    expect(s.lead?.openToolUses[0]?.result?.content).toBe("Nobody decided on the plan before its deadline, so it was not approved (an undecided request is rejected then); no person is waiting to answer now.");
    given([...waiting, { type: 'ApprovalTimedOut', data: { requestId: 'apr-1', action: 'reject' } }]).when({ type: 'TimeOutApproval', requestId: 'apr-1' }).then([]);
    given([...waiting, { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } }]).when({ type: 'TimeOutApproval', requestId: 'apr-1' }).then([]);
  });
  it('a timeout whose policy says approve runs the tool with the requested input', () => {
    const approveOnTimeout = { ...approvalRequested, data: { ...approvalRequested.data, onTimeout: 'approve' } } as DecidedEvent;
    const s = given([...leadWaitingOnTool, approveOnTimeout]).when({ type: 'TimeOutApproval', requestId: 'apr-1' }).then([{ type: 'ApprovalTimedOut', data: { requestId: 'apr-1', action: 'approve', agentId: 'lead' } }]);
    expect(s.lead?.openToolUses[0]).toMatchObject({ state: 'pending', approvedInput: { agent: 'researcher', prompt: 'p' } });
  });
  it('nextDeadline is the earliest open deadline, and none once the task is final', () => {
    const other = { type: 'ClarificationRequested', data: { requestId: 'clr-9', agentId: 'lead', toolUseId: 'tu2', questions: ['q'], context: '', deadline: '2026-01-01T00:30:00.000Z' } } as DecidedEvent;
    const two = [...running, leadTurn(1, [{ id: 'tu1' }, { id: 'tu2', name: 'ask_user', input: {} }]), approvalRequested, other];
    expect(nextDeadline(stateOf(recorded(two)))).toBe('2026-01-01T00:30:00.000Z');
    expect(nextDeadline(stateOf(recorded([...two, { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } }])))).toBeNull();
  });
  it('requesting approval twice for one request id is refused', () => {
    given(waiting).when(cmd('RequestApproval', approvalRequested.data)).thenThrows(InvalidCommandError, /already exists/);
  });
});

describe('clarifications', () => {
  it('the lead asks → awaiting_input; the answer becomes the tool result', () => {
    const s0 = given(leadWaitingOnTool).when(cmd('RequestClarification', clarificationRequested.data)).then([clarificationRequested]);
    expect(s0.status).toBe('awaiting_input');
    const s = given([...leadWaitingOnTool, clarificationRequested]).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['AI safety'], answeredBy: 'u' }).then([
      { type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['AI safety'], answeredBy: 'u', agentId: 'lead' } },
    ]);
    expect(s.status).toBe('running');
    expect(s.lead?.openToolUses[0]?.result?.content).toBe('Q: What?\nA: AI safety');
    // More answers than questions would reach the agent as an unlabelled blob: refused, saying how many.
    given([...leadWaitingOnTool, clarificationRequested]).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['AI safety', 'for execs'], answeredBy: 'u' }).thenThrows(InvalidCommandError, /asks 1 question: give one answer per question, in order, or one answer for all \(2 were given\)/);
    const three: DecidedEvent = { type: 'ClarificationRequested', data: { ...(clarificationRequested.data as object), questions: ['Topic?', 'Audience?', 'Length?'] } as never };
    given([...leadWaitingOnTool, three]).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['a', 'b'], answeredBy: 'u' }).thenThrows(InvalidCommandError, /asks 3 questions/);
    const all = given([...leadWaitingOnTool, three]).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['a', 'b', 'c'], answeredBy: 'u' }).state();
    expect(all.lead?.openToolUses[0]?.result?.content).toBe('Q: Topic?\nA: a\n\nQ: Audience?\nA: b\n\nQ: Length?\nA: c');
    const oneForAll = given([...leadWaitingOnTool, three]).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['short, for execs, on AI safety'], answeredBy: 'u' }).state();
    expect(oneForAll.lead?.openToolUses[0]?.result?.content).toBe('short, for execs, on AI safety');
  });
  it('a subagent that asks is paused until the answer, then dispatched again', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted(), agentTurn('researcher-1', 1, [{ id: 'a-tu', name: 'ask_user', input: { questions: ['Which?'] } }])];
    const ask: DecidedEvent = { type: 'ClarificationRequested', data: { requestId: 'clr-2', agentId: 'researcher-1', toolUseId: 'a-tu', questions: ['Which?'], context: '' } };
    const s = given(hist).when(cmd('RequestClarification', ask.data)).then([ask]);
    expect(s.agents['researcher-1']?.status).toBe('paused');
    expect(s.status).toBe('awaiting_input');
    const s2 = given([...hist, ask]).when({ type: 'AnswerClarification', requestId: 'clr-2', answers: ['this one'], answeredBy: 'u' }).then([
      { type: 'ClarificationAnswered', data: { requestId: 'clr-2', answers: ['this one'], answeredBy: 'u', agentId: 'researcher-1' } },
    ]);
    expect(s2.agents['researcher-1']?.status).toBe('dispatched');
    expect(s2.decidedRequests['clr-2']).toMatchObject({ agentId: 'researcher-1', toolUseId: 'a-tu', result: { content: 'Q: Which?\nA: this one' } });
    // The answer is the asking tool use's result, in the agent's own loop state.
    expect(s.agents['researcher-1']?.openToolUses[0]?.state).toBe('awaiting_answer');
    expect(s2.agents['researcher-1']?.openToolUses[0]).toMatchObject({ state: 'resolved', result: { toolUseId: 'a-tu', content: 'Q: Which?\nA: this one' } });
  });
  it('a subagent tool call that needs approval pauses it; the decision carries the approved input for the runner', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted(), agentTurn('researcher-1', 1, [{ id: 'w-tu' }])];
    const ask: DecidedEvent = {
      type: 'ApprovalRequested',
      data: { requestId: 'apr-w', agentId: 'researcher-1', toolUseId: 'w-tu', toolName: 'write_file', input: { path: 'a.md', content: 'x' }, inputDigest: 'd', plan: 'p', deadline: '2026-01-01T01:00:00.000Z', onTimeout: 'reject' },
    };
    const s = given(hist).when(cmd('RequestApproval', ask.data)).then([ask]);
    expect(s.agents['researcher-1']?.status).toBe('paused');
    const granted = given([...hist, ask]).when({ type: 'DecideApproval', requestId: 'apr-w', decision: 'approve', input: { path: 'b.md', content: 'x' }, decidedBy: 'u' });
    expect(granted.state().agents['researcher-1']?.status).toBe('dispatched');
    expect(granted.state().decidedRequests['apr-w']).toMatchObject({ toolUseId: 'w-tu', approvedInput: { path: 'b.md', content: 'x' } });
    expect(granted.state().agents['researcher-1']?.openToolUses[0]).toMatchObject({ state: 'pending', approvedInput: { path: 'b.md', content: 'x' } });
    const rejected = given([...hist, ask]).when({ type: 'DecideApproval', requestId: 'apr-w', decision: 'reject', reason: 'no', decidedBy: 'u' });
    // Not "the plan": a call of a subagent's, named (a delegation or a plan of the lead's is "the plan").
    expect(rejected.state().decidedRequests['apr-w']?.result?.content).toBe('The user rejected this call (write_file): no');
    expect(rejected.state().agents['researcher-1']?.openToolUses[0]).toMatchObject({ state: 'resolved', result: { content: 'The user rejected this call (write_file): no' } });
  });
  it('a subagent may only ask about a tool use of its own last turn', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted(), agentTurn('researcher-1', 1, [{ id: 'w-tu' }])];
    const ask = { requestId: 'apr-x', agentId: 'researcher-1', toolUseId: 'other', toolName: 'write_file', input: {}, inputDigest: 'd', plan: 'p', deadline: '2026-01-01T01:00:00.000Z', onTimeout: 'reject' };
    given(hist).when(cmd('RequestApproval', ask)).thenThrows(InvalidCommandError, /not open on agent 'researcher-1'/);
  });
  it('an unanswered clarification times out into a result that tells the agent to go on', () => {
    const s = given([...leadWaitingOnTool, clarificationRequested]).when({ type: 'TimeOutClarification', requestId: 'clr-1' }).then([{ type: 'ClarificationTimedOut', data: { requestId: 'clr-1', agentId: 'lead' } }]);
    expect(s.lead?.openToolUses[0]?.result?.content).toMatch(/did not answer before the deadline/);
    expect(s.status).toBe('running');
  });
  it('two subagents ask at once: each answer resumes only its own agent', () => {
    const hist = [...running, leadTurn(1, [{ id: 'tu1' }, { id: 'tu2' }]), dispatched('researcher-1', 'tu1'), dispatched('researcher-2', 'tu2'), agentStarted('researcher-1'), agentStarted('researcher-2')];
    const ask = (agentId: string, requestId: string): DecidedEvent => ({ type: 'ClarificationRequested', data: { requestId, agentId, toolUseId: `${agentId}-ask`, questions: ['q'], context: '' } });
    const both = [...hist, ask('researcher-1', 'c1'), ask('researcher-2', 'c2')];
    expect(stateOf(recorded(both)).status).toBe('awaiting_input');
    const s = given(both).when({ type: 'AnswerClarification', requestId: 'c2', answers: ['a'], answeredBy: 'u' }).state();
    expect(s.agents['researcher-1']?.status).toBe('paused');
    expect(s.agents['researcher-2']?.status).toBe('dispatched');
    expect(s.status).toBe('running');
    expect(Object.keys(s.pendingRequests)).toEqual(['c1']);
  });
  it('answering twice or answering an approval is refused', () => {
    const answered = [...leadWaitingOnTool, clarificationRequested, { type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['a'], answeredBy: 'u' } } as DecidedEvent];
    given(answered).when({ type: 'AnswerClarification', requestId: 'clr-1', answers: ['b'], answeredBy: 'u' }).thenThrows(RequestAlreadyDecidedError, /answered/);
    given([...leadWaitingOnTool, approvalRequested]).when({ type: 'AnswerClarification', requestId: 'apr-1', answers: ['b'], answeredBy: 'u' }).thenThrows(InvalidCommandError, /not a clarification/);
  });
});

describe('completion, failure, cancellation', () => {
  it('CompleteTask after the final answer → completed', () => {
    const s = given([...running, leadTurn(1)]).when({ type: 'CompleteTask', summary: 's', reportPath: null }).then([{ type: 'TaskCompleted', data: { summary: 's', reportPath: null } }]);
    expect(s.status).toBe('completed');
    expect(s.result).toEqual({ summary: 's', reportPath: null });
  });
  it('CompleteTask is illegal before the final answer or while subagents run', () => {
    given(leadWaitingOnTool).when({ type: 'CompleteTask', summary: 's', reportPath: null }).thenThrows(IllegalTransitionError, /final answer/);
  });
  it('FailTask from any live state; not twice', () => {
    const s = given(leadWaitingOnTool).when({ type: 'FailTask', code: 'x', message: 'y' }).then([{ type: 'TaskFailed', data: { code: 'x', message: 'y' } }]);
    expect(s.status).toBe('failed');
    given([...running, { type: 'TaskFailed', data: { code: 'x', message: 'y' } }]).when({ type: 'FailTask', code: 'x', message: 'y' }).thenThrows(TaskFinalError, /already failed/);
  });
  it('CancelTask closes open requests and stops active agents; a final task cannot be cancelled', () => {
    const hist = [...leadWaitingOnTool, dispatched(), agentStarted(), { ...approvalRequested, data: { ...approvalRequested.data, toolUseId: 'tu1' } } as DecidedEvent];
    const s = given(hist).when({ type: 'CancelTask', reason: 'stop', requestedBy: 'u' }).then([{ type: 'TaskCancelled', data: { reason: 'stop', requestedBy: 'u' } }]);
    expect(s.status).toBe('cancelled');
    expect(s.pendingRequests).toEqual({});
    expect(s.decidedRequests['apr-1']?.decision).toMatch(/closed/);
    expect(s.agents['researcher-1']?.status).toBe('cancelled');
    given([...running, leadTurn(1), { type: 'TaskCompleted', data: { summary: '', reportPath: null } }]).when({ type: 'CancelTask', reason: 'r', requestedBy: 'u' }).thenThrows(TaskFinalError, /already completed/);
  });
});

describe('state derivation', () => {
  it('status is running while a subagent runs even with a request open (something can run)', () => {
    const hist = recorded([...leadWaitingOnTool, dispatched(), agentStarted()]);
    const s = stateOf([...hist, ...recorded([{ type: 'ClarificationRequested', data: { requestId: 'c', agentId: 'lead', toolUseId: 'tu1', questions: ['q'], context: '' } }], { from: 5 })]);
    expect(s.status).toBe('running');
  });
  it('agent-stream events move the agent stream version, not the task version', () => {
    const task = recorded([...leadWaitingOnTool, dispatched(), agentStarted()]);
    const agentTurn = recorded([{ type: 'ModelTurnRecorded', data: { ...(leadTurn(1).data as object), agentId: 'researcher-1' } as never }], { streamId: agentStreamId(TASK, 'researcher-1') });
    const s = stateOf([...task, ...agentTurn]);
    expect(s.version).toBe(5);
    expect(s.agents['researcher-1']).toMatchObject({ streamVersion: 1, turns: 1 });
  });
});
