import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allTools, builtinTeams, ModelRejectedError, OfflineModel, outboxRequest, sendEmailTool, toolSpec, type AgentDefinition, type ModelClient, type ModelRequest, type TeamDefinition } from '@baton/agents';
import { agentStreamId, loopOf, type ContentBlock } from '@baton/domain';
import { handleCommand, loadTask, TaskWriter, type EventStore } from '@baton/event-store';
import { readArtifact, searchCorpus, storeArtifact, storeWorkspace, taskChange, taskTree } from '@baton/storage';
import { E2BSandboxProvider, findBwrap, LocalSandboxProvider } from '@baton/sandbox';
import { FakeE2B } from '@baton/sandbox/fake-e2b';
import { silentLogger } from '@baton/runtime';
import { dispatchedTask, pgTest as test, waitFor } from '@baton/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect } from 'vitest';
import { CauseNotVisibleError, claimAttempt, runSubagentJob, type RunnerDeps } from './subagent.ts';
import { artifactStore } from './wiring.ts';

const log = silentLogger();
let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-runner-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const deps = (store: EventStore, model: ModelClient = new OfflineModel(), runnerId = 'runner-a'): RunnerDeps => {
  const { pool } = store;
  return { store, model, sandboxes: new LocalSandboxProvider({ root, pool }), artifacts: artifactStore(pool), search: (q, n) => searchCorpus(pool, 'docs', q, n), runnerId, now: () => new Date(), log };
};
/** The research team with an `engineer` agent, and a model that answers turn n with the n-th list of tool uses, then 'done'. */
function withEngineer(o: Pick<AgentDefinition, 'model' | 'tools'> & Partial<AgentDefinition>, turns: ContentBlock[][]): { team: TeamDefinition; script: ModelClient } {
  const engineer: AgentDefinition = { id: 'engineer', name: 'Engineer', prompt: 'p', maxTurns: 5, maxTokens: 100, ...o };
  const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
  const script: ModelClient = {
    name: 'script',
    complete: async (r) => {
      const content = turns[r.messages.filter((m) => m.role === 'assistant').length];
      return content ? { content, stopReason: 'tool_use', usage, model: o.model, offline: true } : { content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage, model: o.model, offline: true };
    },
  };
  return { team: { ...builtinTeams.research!, agents: { ...builtinTeams.research!.agents, engineer } }, script };
}
const artifact = async (store: EventStore, id: string, file: string): Promise<string | undefined> => (await readArtifact(store.pool, id, file))?.content.toString('utf8');


/**
 * A research task on an input workspace whose lead delegated twice to `engineer` (`tu1` with
 * `prompt`, `tu2` "look"); engineer-1 is dispatched for the first.
 */
async function engineerDispatched(store: EventStore, workspace: { digest: string; source: 'upload'; name: null; files: number; bytes: number }, prompt: string): Promise<{ id: string; workspace: typeof workspace }> {
  const id = randomUUID();
  await handleCommand(store, id, { type: 'SubmitTask', prompt, team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace, budget: null });
  await handleCommand(store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
  await handleCommand(store, id, { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'engineer', prompt } }, { type: 'tool_use', id: 'tu2', name: 'Task', input: { agent: 'engineer', prompt: 'look' } }] });
  await handleCommand(store, id, { type: 'DispatchSubagent', agentId: 'engineer-1', agentType: 'engineer', toolUseId: 'tu1', prompt });
  return { id, workspace };
}
describe('runSubagentJob', () => {
  test('runs the subagent in its workspace, records its turns in its own stream, and reports completion', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    expect(await runSubagentJob(deps(pg.store), id, 'researcher-1', () => {})).toBe('completed');
    const { state, events } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']).toMatchObject({ status: 'completed', attempt: 1, turns: 3, filesCreated: ['notes.md'] });
    expect(state.lead?.openToolUses[0]?.state).toBe('resolved');
    const own = events.filter((e) => e.streamId === agentStreamId(id, 'researcher-1')).map((e) => e.type);
    expect(own).toEqual(['SubagentStarted', 'ModelTurnRecorded', 'ToolResultsRecorded', 'ModelTurnRecorded', 'ToolResultsRecorded', 'ModelTurnRecorded']);
    // The notes are an artifact of the task (ArtifactStored, committed with the completion); the sandbox is gone.
    expect(await artifact(pg.store, id, 'notes.md')).toMatch(/offline model/);
    expect(state.artifacts).toEqual([expect.objectContaining({ path: 'notes.md', agentId: 'researcher-1', mediaType: 'text/markdown; charset=utf-8' })]);
    const completion = events.findIndex((e) => e.type === 'SubagentCompleted');
    expect(events[completion - 1]?.type).toBe('ArtifactStored');
    await expect(readFile(path.join(root, id, 'researcher-1', 'notes.md'), 'utf8')).rejects.toThrow(/ENOENT/);
    // The job delivered again: nothing to do, nothing appended.
    expect(await runSubagentJob(deps(pg.store), id, 'researcher-1', () => {})).toBe('nothing-to-do');
    expect((await loadTask(pg.store, id)).events).toHaveLength(events.length);
  });

  test("a file another agent's file holds the path of is kept as <agentId>/<path>, and its completion and summary say so (they named the other agent's path)", async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    // Another agent finished first with its own notes.md.
    await storeArtifact(pg.store.pool, { taskId: id, path: 'notes.md', agentId: 'researcher-0', content: Buffer.from('the other notes\n') });
    expect(await runSubagentJob(deps(pg.store), id, 'researcher-1', () => {})).toBe('completed');
    const { state } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']).toMatchObject({ status: 'completed', filesCreated: ['researcher-1/notes.md'] });
    expect(state.agents['researcher-1']?.summary).toMatch(/\n\[kept under another path, another agent's file holding its own: notes\.md as researcher-1\/notes\.md\]$/);
    expect(state.artifacts.map((a) => a.path)).toEqual(['researcher-1/notes.md']);
    expect(await artifact(pg.store, id, 'notes.md')).toBe('the other notes\n');
    expect(await artifact(pg.store, id, 'researcher-1/notes.md')).toMatch(/offline model/);
    // Both names held by other agents' files: not kept, and said — it had failed the agent on every attempt (each final turn paid again), then agent_lost.
    const both = await dispatchedTask(pg.store);
    await storeArtifact(pg.store.pool, { taskId: both, path: 'notes.md', agentId: 'researcher-0', content: Buffer.from('theirs\n') });
    await storeArtifact(pg.store.pool, { taskId: both, path: 'researcher-1/notes.md', agentId: 'researcher-0', content: Buffer.from('also theirs\n') });
    expect(await runSubagentJob(deps(pg.store), both, 'researcher-1', () => {})).toBe('completed');
    const after = (await loadTask(pg.store, both)).state.agents['researcher-1'];
    expect(after).toMatchObject({ status: 'completed', filesCreated: [] });
    expect(after?.summary).toMatch(/\n\[not kept as the task's files: notes\.md \(researcher-1\/notes\.md as well as notes\.md are other agents' files\)\]$/);
  });

  test('a takeover resumes from the last recorded turn: a tool whose result was recorded never runs again', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    // Runner A started, recorded turn 1 with its tool result, then died.
    const { state } = await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a' });
    const calls: ModelRequest[] = [];
    const model = new OfflineModel();
    const counting: ModelClient = { name: 'counting', complete: async (r) => { calls.push(r); return model.complete(r); } };
    const first = await model.complete({ agentType: 'researcher', model: 'm', system: '', messages: [{ role: 'user', content: 'Research the topic' }], tools: [toolSpec(allTools.web_search!)], maxTokens: 100 });
    const toolUse = first.content.find((b) => b.type === 'tool_use') as { id: string };
    const a = new TaskWriter(pg.store, id, state);
    a.apply([
      { type: 'RecordModelTurn', agentId: 'researcher-1', turn: 1, model: 'offline', content: first.content, stopReason: 'tool_use', usage: first.usage, offline: true, durationMs: 0, attempt: 1 },
      { type: 'RecordToolResults', agentId: 'researcher-1', results: [{ toolUseId: toolUse.id, toolName: 'web_search', content: '1. Recorded hit\n   source: a.md\n   recorded by runner A', isError: false }], attempt: 1 },
    ]);
    await a.flush();
    // Runner B takes the redelivered job.
    const ran: string[] = [];
    const d = { ...deps(pg.store, counting, 'runner-b'), audit: (e: { tool: string }) => ran.push(e.tool) };
    expect(await runSubagentJob(d, id, 'researcher-1', () => {})).toBe('completed');
    expect(calls).toHaveLength(2); // only turns 2 and 3 were asked of the model
    expect(calls[0]?.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']); // tool_use paired with its result
    const after = await loadTask(pg.store, id);
    expect(after.state.agents['researcher-1']).toMatchObject({ status: 'completed', attempt: 2, turns: 3, filesCreated: ['notes.md'] });
    const turns = after.events.filter((e) => e.type === 'ModelTurnRecorded' && e.streamId.startsWith('agent-')).map((e) => (e.data as { turn: number }).turn);
    expect(turns).toEqual([1, 2, 3]);
    // The recorded search did not run again; the notes were built from runner A's recorded result.
    expect(ran).toEqual(['write_file']);
    expect(await artifact(pg.store, id, 'notes.md')).toMatch(/Recorded hit/);
  });

  test("an agent resumed into an empty workspace that had written nothing yet (a fork past its question, say) starts again from the files it began with", async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    // A file stored before the researcher started: its workspace began with it.
    const brief = await storeArtifact(pg.store.pool, { taskId: id, path: 'brief.md', agentId: null, content: Buffer.from('# the brief\n') });
    await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: 'brief.md', bytes: brief.bytes, sha256: brief.sha256, mediaType: brief.mediaType });
    // It started and read the brief (no write), then its sandbox was lost: no sandbox, nothing on disk.
    const { state } = await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a' });
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const read = (n: number) => ({ type: 'tool_use' as const, id: `r${n}`, name: 'read_file', input: { path: 'brief.md' } });
    const a = new TaskWriter(pg.store, id, state);
    a.apply([
      { type: 'RecordModelTurn', agentId: 'researcher-1', turn: 1, model: 'offline', content: [read(1)], stopReason: 'tool_use', usage, offline: true, durationMs: 0, attempt: 1 },
      { type: 'RecordToolResults', agentId: 'researcher-1', results: [{ toolUseId: 'r1', toolName: 'read_file', content: '# the brief\n', isError: false }], attempt: 1 },
    ]);
    await a.flush();
    // Resumed: it reads the brief again, then ends.
    const script: ModelClient = {
      name: 'script',
      complete: async (r) => (r.messages.filter((m) => m.role === 'assistant').length === 1 ? { content: [read(2)], stopReason: 'tool_use', usage, model: 'm', offline: true } : { content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage, model: 'm', offline: true }),
    };
    expect(await runSubagentJob(deps(pg.store, script, 'runner-b'), id, 'researcher-1', () => {})).toBe('completed');
    const results = (await loadTask(pg.store, id)).events.flatMap((e) => (e.type === 'ToolResultsRecorded' ? e.data.results : []));
    expect(results.find((r) => r.toolUseId === 'r2')).toMatchObject({ isError: false, content: '# the brief\n' });
  });

  test('a superseded runner stops instead of completing', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'runner-a' });
    // Runner B takes over (attempt 2); while B's model call is in flight runner C claims attempt 3.
    // B's turn must not be recorded, and B must stop rather than complete.
    let claimed: Awaited<ReturnType<typeof claimAttempt>> = null;
    const slow: ModelClient = {
      name: 'slow',
      complete: async (r) => {
        if (!claimed) claimed = await claimAttempt({ store: pg.store, runnerId: 'runner-c', now: () => new Date() }, id, 'researcher-1', 3);
        return new OfflineModel().complete(r);
      },
    };
    expect(await runSubagentJob(deps(pg.store, slow, 'runner-b'), id, 'researcher-1', () => {})).toBe('superseded');
    const after = await loadTask(pg.store, id);
    expect(after.state.agents['researcher-1']).toMatchObject({ status: 'running', attempt: 3, turns: 0 });
    expect(after.events.filter((e) => e.streamId.startsWith('agent-')).map((e) => [e.type, (e.data as { attempt?: number }).attempt])).toEqual([
      ['SubagentStarted', 2],
      ['SubagentStarted', 3],
    ]);
  });

  test('a call to a tool the agent may not use becomes an error result and the loop goes on', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    let turn = 0;
    const rogue: ModelClient = {
      name: 'rogue',
      complete: async () => {
        turn++;
        const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
        if (turn === 1) return { content: [{ type: 'tool_use', id: 'x1', name: 'Task', input: { agent: 'a', prompt: 'p' } }, { type: 'tool_use', id: 'x2', name: 'write_file', input: { path: '../../etc/evil', content: 'x' } }], stopReason: 'tool_use', usage, model: 'r', offline: true };
        return { content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn', usage, model: 'r', offline: true };
      },
    };
    expect(await runSubagentJob(deps(pg.store, rogue), id, 'researcher-1', () => {})).toBe('completed');
    const results = (await loadTask(pg.store, id)).events.find((e) => e.type === 'ToolResultsRecorded' && e.streamId.startsWith('agent-'));
    expect(results?.data).toMatchObject({ results: [
      { toolUseId: 'x1', isError: true, content: expect.stringMatching(/not available to this agent/) },
      { toolUseId: 'x2', isError: true, content: expect.stringMatching(/'\.\.' is not allowed/) },
    ] });
  });

  test('the iteration cap completes the subagent with that fact recorded', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const looping: ModelClient = {
      name: 'loop',
      complete: async (r) => ({ content: [{ type: 'tool_use', id: `l${r.messages.length}`, name: 'list_directory', input: {} }], stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, model: 'l', offline: true }),
    };
    expect(await runSubagentJob(deps(pg.store, looping), id, 'researcher-1', () => {})).toBe('completed');
    const { events, state } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']?.turns).toBe(10);
    expect(events.find((e) => e.type === 'SubagentCompleted')?.data).toMatchObject({ success: false, iterationCapReached: true, summary: expect.stringMatching(/iteration cap of 10/) });
  });

  test('a subagent that asks pauses (the job ends, holding nothing); the answer resumes it with the answer as that tool_use\'s result', async ({ pg }) => {
    const id = await dispatchedTask(pg.store, 'researcher', 'Research Rust async runtimes; ask me which sources to use');
    const calls: ModelRequest[] = [];
    const offline = new OfflineModel();
    const model: ModelClient = { name: 'c', complete: async (r) => { calls.push(r); return offline.complete(r); } };
    expect(await runSubagentJob(deps(pg.store, model), id, 'researcher-1', () => {})).toBe('paused');
    let { state } = await loadTask(pg.store, id);
    expect(state.status).toBe('awaiting_input');
    expect(state.agents['researcher-1']).toMatchObject({ status: 'paused', attempt: 1, turns: 1 });
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'clarification', agentId: 'researcher-1', questions: ['Which sources should the notes rely on?'], options: ['peer-reviewed papers', 'news and blogs', 'both'] });
    // A redelivered job while paused: nothing to do.
    expect(await runSubagentJob(deps(pg.store, model), id, 'researcher-1', () => {})).toBe('nothing-to-do');

    await handleCommand(pg.store, id, { type: 'AnswerClarification', requestId: req!.requestId, answers: ['peer-reviewed papers'], answeredBy: 'u' });
    expect((await loadTask(pg.store, id)).state.agents['researcher-1']?.status).toBe('dispatched');
    expect(await runSubagentJob(deps(pg.store, model, 'runner-b'), id, 'researcher-1', () => {})).toBe('completed');
    ({ state } = await loadTask(pg.store, id));
    expect(state.agents['researcher-1']).toMatchObject({ status: 'completed', attempt: 2, turns: 4, filesCreated: ['notes.md'] });
    expect(await artifact(pg.store, id, 'notes.md')).toMatch(/Guidance from the user\n\n- peer-reviewed papers/);
    // The second model call saw the question paired with exactly its answer.
    const second = calls[1]!.messages;
    expect(second[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: (req as { toolUseId: string }).toolUseId, content: 'Q: Which sources should the notes rely on?\nA: peer-reviewed papers' }] });
    expect(calls).toHaveLength(4); // ask, search, write, finish: the asking turn was not repeated
  });

  test('a subagent tool gated by the team\'s approval policy: approve with an edit runs the edited input; reject gives the model the reason', async ({ pg }) => {
    const team = { ...builtinTeams.research!, approvals: [{ agent: 'researcher', tool: 'write_file', require: 'always' as const, onTimeout: 'reject' as const }] };
    const teams = { research: team };
    const id = await dispatchedTask(pg.store);
    const d = { ...deps(pg.store), teams };
    expect(await runSubagentJob(d, id, 'researcher-1', () => {})).toBe('paused');
    let { state } = await loadTask(pg.store, id);
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'approval', agentId: 'researcher-1', toolName: 'write_file', input: { path: 'notes.md' } });
    const edited = { path: 'approved-notes.md', content: 'edited by a person' };
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: req!.requestId, decision: 'approve', input: edited, decidedBy: 'u' });
    expect(await runSubagentJob(d, id, 'researcher-1', () => {})).toBe('completed');
    ({ state } = await loadTask(pg.store, id));
    expect(state.agents['researcher-1']?.filesCreated).toEqual(['approved-notes.md']);
    expect(await artifact(pg.store, id, 'approved-notes.md')).toBe('edited by a person');
    // The model is told its call was edited, and what ran (before: the result alone, for a path it never named).
    const ran = (await loadTask(pg.store, id)).events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => (e.data as { results: { toolName: string; content: string }[] }).results).find((r) => r.toolName === 'write_file');
    expect(ran?.content).toBe('[a person edited this call before approving it; it ran with: {"path":"approved-notes.md","content":"edited by a person"}]\ncreated approved-notes.md (18 bytes)');

    const id2 = await dispatchedTask(pg.store);
    expect(await runSubagentJob(d, id2, 'researcher-1', () => {})).toBe('paused');
    const req2 = Object.values((await loadTask(pg.store, id2)).state.pendingRequests)[0]!;
    await handleCommand(pg.store, id2, { type: 'DecideApproval', requestId: req2.requestId, decision: 'reject', reason: 'no files today', decidedBy: 'u' });
    expect(await runSubagentJob(d, id2, 'researcher-1', () => {})).toBe('completed');
    const results = (await loadTask(pg.store, id2)).events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => (e.data as { results: { content: string }[] }).results);
    expect(results.map((r) => r.content)).toEqual([expect.stringMatching(/^no results for/), 'The user rejected this call (write_file): no files today']);
    expect(await artifact(pg.store, id2, 'notes.md')).toBeUndefined();
  });

  test('send_email: a person approves it, then it goes to the outbox as one EmailRequested (nothing sent from the sandbox); run again after a crash, it records nothing new', async ({ pg }) => {
    const id = await dispatchedTask(pg.store, 'email-agent', 'Mail report.md to ann@example.com.\nSubject: Report: X');
    const stored = await storeArtifact(pg.db.pool, { taskId: id, path: 'report.md', agentId: null, content: Buffer.from('# Report\n\nFindings.') });
    await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: 'report.md', bytes: stored.bytes, sha256: stored.sha256, mediaType: stored.mediaType });
    // send_email needs a person by default (the team names no rule for it).
    expect(await runSubagentJob(deps(pg.store), id, 'email-agent-1', () => {})).toBe('paused');
    let { state, events } = await loadTask(pg.store, id);
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'approval', toolName: 'send_email', input: { to: ['ann@example.com'], attach: ['report.md'] }, plan: expect.stringMatching(/Email to: ann@example\.com\nSubject: Report: X\nAttached: report\.md\n\n# Report/) });
    expect(events.some((e) => e.type === 'EmailRequested')).toBe(false);
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: req!.requestId, decision: 'approve', decidedBy: 'u' });

    // Runner A took the approved call, recorded EmailRequested (as its outbox does) and died before the tool result.
    const claimed = await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'email-agent-1', attempt: 2, runnerId: 'runner-a' });
    const call = claimed.state.agents['email-agent-1']!.openToolUses[0]!;
    const first = outboxRequest(claimed.state, 'email-agent-1', call.toolUseId, sendEmailTool.input.parse(call.approvedInput));
    if (!first.ok) throw new Error(first.error);
    await handleCommand(pg.store, id, first.command);
    // Runner B takes the job over: the call runs again, and records nothing new.
    const ran: string[] = [];
    expect(await runSubagentJob({ ...deps(pg.store, new OfflineModel(), 'runner-b'), audit: (e) => ran.push(e.tool) }, id, 'email-agent-1', () => {})).toBe('completed');
    expect(ran).toEqual(['send_email']);
    ({ state, events } = await loadTask(pg.store, id));
    const requested = events.filter((e) => e.type === 'EmailRequested');
    expect(requested).toHaveLength(1);
    expect(requested[0]?.data).toMatchObject({ agentId: 'email-agent-1', to: ['ann@example.com'], subject: 'Report: X', body: '# Report\n\nFindings.', attachments: [{ path: 'report.md', bytes: stored.bytes, sha256: stored.sha256 }] });
    const emailId = (requested[0]?.data as { emailId: string }).emailId;
    expect(state.emails[emailId]).toMatchObject({ status: 'queued' });
    const results = events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => (e.data as { results: { toolName: string; content: string }[] }).results);
    expect(results.filter((r) => r.toolName === 'send_email')).toEqual([expect.objectContaining({ content: expect.stringMatching(new RegExp(`^queued as ${emailId}: to ann@example\\.com`)) })]);
    expect(state.agents['email-agent-1']?.summary).toMatch(/Mail queued as/);
  });

  test('cancelling the task stops a running subagent at its next step (no further turn, no completion)', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    const offline = new OfflineModel();
    const cancelling: ModelClient = {
      name: 'cancel-during-call',
      complete: async (r) => {
        const res = await offline.complete(r);
        if (r.messages.length === 1) await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'stop', requestedBy: 'u' });
        return res;
      },
    };
    expect(await runSubagentJob(deps(pg.store, cancelling), id, 'researcher-1', () => {})).toBe('cancelled');
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('cancelled');
    expect(state.agents['researcher-1']?.status).toBe('cancelled');
    expect(events.some((e) => e.type === 'SubagentCompleted')).toBe(false);
    expect(events.filter((e) => e.type === 'ModelTurnRecorded')).toHaveLength(2); // the lead's, and the one in flight at the cancel
  });

  test('a cancel that commits between the claim of an attempt and its fence: no model call, no turn, the agent stays cancelled', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    // The store as the runner sees it, with the cancel landing just before the fence (the agent stream's SubagentStarted).
    const store = Object.create(pg.store) as EventStore;
    let cancelledFirst = false;
    store.append = async (a) => {
      if (!cancelledFirst && a.streamId === agentStreamId(id, 'researcher-1') && a.events[0]?.type === 'SubagentStarted') {
        cancelledFirst = true;
        await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'stop', requestedBy: 'u' });
      }
      return pg.store.append(a);
    };
    let calls = 0;
    const offline = new OfflineModel();
    const counting: ModelClient = { name: 'counting', complete: async (r) => (calls++, offline.complete(r)) };
    expect(await runSubagentJob(deps(store, counting), id, 'researcher-1', () => {})).toBe('cancelled');
    expect(cancelledFirst).toBe(true);
    expect(calls).toBe(0);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('cancelled');
    expect(state.agents['researcher-1']?.status).toBe('cancelled');
    expect(events.filter((e) => e.streamId === agentStreamId(id, 'researcher-1')).map((e) => e.type)).toEqual(['SubagentStarted']);
  });

  test('a job whose cause event is not readable yet is retried rather than taken for nothing to do', async ({ pg }) => {
    const id = await dispatchedTask(pg.store);
    await expect(runSubagentJob(deps(pg.store), id, 'researcher-1', () => {}, { causeEventId: randomUUID() })).rejects.toThrow(CauseNotVisibleError);
    expect((await loadTask(pg.store, id)).state.agents['researcher-1']?.status).toBe('dispatched'); // nothing recorded
    const dispatch = (await loadTask(pg.store, id)).events.find((e) => e.type === 'SubagentDispatched')!;
    expect(await runSubagentJob(deps(pg.store), id, 'researcher-1', () => {}, { causeEventId: dispatch.id })).toBe('completed');
  });

  test("the model's stop reasons: pause_turn goes on with the turn sent back as it was (one assistant message after); a refusal fails the agent with its words", async ({ pg }) => {
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const sent: ModelRequest[] = [];
    const paused: ModelClient = {
      name: 'paused',
      complete: async (r) => {
        sent.push(r);
        return sent.length === 1
          ? { content: [{ type: 'text', text: 'searching…' }], stopReason: 'pause_turn', usage, model: 'm', offline: true }
          : sent.length === 2
            ? { content: [{ type: 'tool_use', id: 'w1', name: 'write_file', input: { path: 'notes.md', content: 'n' } }], stopReason: 'tool_use', usage, model: 'm', offline: true }
            : { content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage, model: 'm', offline: true };
      },
    };
    const id = await dispatchedTask(pg.store);
    expect(await runSubagentJob(deps(pg.store, paused), id, 'researcher-1', () => {})).toBe('completed');
    expect(sent.map((r) => r.messages.map((m) => m.role).join(','))).toEqual(['user', 'user,assistant', 'user,assistant,user']);
    expect(sent[2]?.messages[1]?.content).toEqual([{ type: 'text', text: 'searching…' }, { type: 'tool_use', id: 'w1', name: 'write_file', input: { path: 'notes.md', content: 'n' } }]);
    expect((await loadTask(pg.store, id)).state.agents['researcher-1']).toMatchObject({ status: 'completed', summary: 'done', filesCreated: ['notes.md'] });

    const refusing: ModelClient = { name: 'no', complete: async () => ({ content: [{ type: 'text', text: 'I will not research that.' }], stopReason: 'refusal', usage, model: 'm', offline: true }) };
    const other = await dispatchedTask(pg.store);
    await runSubagentJob(deps(pg.store, refusing), other, 'researcher-1', () => {});
    const { state } = await loadTask(pg.store, other);
    expect(state.agents['researcher-1']).toMatchObject({ status: 'failed', error: { code: 'model_refused', message: "agent researcher-1's model refused to go on: I will not research that." } });
    expect(state.lead?.openToolUses[0]?.result).toMatchObject({ isError: true, content: expect.stringMatching(/model_refused/) });

    // A request the model API refuses for good: the agent fails at once (one call, no retry), saying why.
    let calls = 0;
    const rejecting: ModelClient = { name: 'rejects', complete: async () => (calls++, Promise.reject(new ModelRejectedError('the Messages API refused the request: 401 authentication_error: invalid x-api-key'))) };
    const third = await dispatchedTask(pg.store);
    await runSubagentJob(deps(pg.store, rejecting), third, 'researcher-1', () => {});
    expect(calls).toBe(1);
    expect((await loadTask(pg.store, third)).state.agents['researcher-1']).toMatchObject({ status: 'failed', error: { code: 'model_error', message: "agent researcher-1's model call failed for good: the Messages API refused the request: 401 authentication_error: invalid x-api-key" } });
  });

  test('an agent whose workspace grows past its limit fails at once with workspace_too_large (no retry); nothing of it is saved, its sandbox goes, and the lead is told', async ({ pg }) => {
    const { team, script } = withEngineer({ model: 'm', tools: ['write_file'] }, [
      [{ type: 'tool_use', id: 'w1', name: 'write_file', input: { path: 'small.txt', content: 'ok' } }],
      [
        { type: 'tool_use', id: 'w2', name: 'write_file', input: { path: 'out/a.txt', content: 'x'.repeat(600 * 1024) } },
        { type: 'tool_use', id: 'w3', name: 'write_file', input: { path: 'out/b.txt', content: 'y'.repeat(500 * 1024) } },
      ],
    ]);
    const id = await dispatchedTask(pg.store, 'engineer', 'write a lot');
    const d = { ...deps(pg.store, script), teams: { research: team }, sandboxes: new LocalSandboxProvider({ root, pool: pg.store.pool, maxWorkspaceBytes: 1024 * 1024 }) };
    expect(await runSubagentJob(d, id, 'engineer-1', () => {})).toBe('failed');
    const { state, events } = await loadTask(pg.store, id);
    expect(state.agents['engineer-1']).toMatchObject({ status: 'failed', attempt: 1, error: { code: 'workspace_too_large', message: 'the workspace holds 1.1 MiB in 3 files, over its limit of 1 MiB (SANDBOX_MAX_WORKSPACE_BYTES): nothing since its last save was kept; the largest: out/a.txt (600 KiB), out/b.txt (500 KiB), small.txt (2 bytes)' } });
    // The lead's delegation is answered with the failure, in those words.
    expect(state.lead?.openToolUses[0]).toMatchObject({ state: 'resolved' });
    // The turn that grew it was never committed: the log ends at the last turn whose files were saved.
    const own = events.filter((e) => e.streamId === agentStreamId(id, 'engineer-1')).map((e) => e.type);
    expect(own).toEqual(['SubagentStarted', 'ModelTurnRecorded', 'ToolResultsRecorded', 'ModelTurnRecorded']);
    expect((await pg.db.pool.query('select state from sandboxes where task_id = $1', [id])).rows).toEqual([{ state: 'killed' }]);
    expect((await pg.db.pool.query('select count(*)::int as n from sandbox_files where sandbox_id like $1', [`${id}/%`])).rows[0].n).toBe(0);
    await expect(readFile(path.join(root, id, 'engineer-1', 'out/a.txt'))).rejects.toThrow(/ENOENT/);
    // Delivered again, the job has nothing to do.
    expect(await runSubagentJob(d, id, 'engineer-1', () => {})).toBe('nothing-to-do');
  });

  test.runIf(findBwrap() !== null)("files an agent made that are not kept as the task's files are said: past the 200 one command records (to the agent), over the size a file may have (in its summary)", async ({ pg }) => {
    const { team, script } = withEngineer({ model: 'm', tools: ['run_command'] }, [
      [{ type: 'tool_use', id: 'c1', name: 'run_command', input: { command: 'mkdir many && for i in $(seq 1 205); do echo $i > many/f$i.txt; done' } }],
      [{ type: 'tool_use', id: 'c2', name: 'run_command', input: { command: 'head -c 50000001 /dev/zero > big.bin' } }],
    ]);
    const id = await dispatchedTask(pg.store, 'engineer', 'make files');
    expect(await runSubagentJob({ ...deps(pg.store, script), teams: { research: team } }, id, 'engineer-1', () => {})).toBe('completed');
    const { state, events } = await loadTask(pg.store, id);
    const results = events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => e.data.results);
    expect(results.find((r) => r.toolUseId === 'c1')?.content).toMatch(/\[this command created 205 files: only the first 200 of each are recorded and kept as the task's files; the rest are not — make fewer files, or put them in one archive\]/);
    expect(state.agents['engineer-1']?.summary).toBe("done\n[not kept as the task's files: big.bin (47.7 MiB, 50000001 bytes: more than the 50000000 a file may have)]");
    expect(state.artifacts.some((a) => a.path === 'big.bin')).toBe(false);
  });

  test.runIf(findBwrap() !== null)("files a command deletes leave the task's files (FileDeleted): gone from its artifacts and from the next agent's workspace; one deleted and written again is back", async ({ pg }) => {
    const { team, script } = withEngineer({ model: 'm', tools: ['write_file', 'run_command'] }, [
      [{ type: 'tool_use', id: 'c1', name: 'run_command', input: { command: 'echo s > scratch.txt' } }],
      [{ type: 'tool_use', id: 'c2', name: 'run_command', input: { command: 'rm old.ts README.md scratch.txt && rm -r docs' } }],
      [{ type: 'tool_use', id: 'w1', name: 'write_file', input: { path: 'README.md', content: '# new\n' } }],
    ]);
    const { script: look } = withEngineer({ model: 'm', tools: ['run_command'] }, [[{ type: 'tool_use', id: 'l1', name: 'run_command', input: { command: 'find . -type f | sort' } }]]);
    const input = [
      { path: 'README.md', mode: 0o644, content: Buffer.from('# old\n') },
      { path: 'old.ts', mode: 0o644, content: Buffer.from('x') },
      { path: 'docs/a.md', mode: 0o644, content: Buffer.from('a') },
      { path: 'keep.ts', mode: 0o644, content: Buffer.from('k') },
    ];
    const { id } = await engineerDispatched(pg.store, { digest: 'a'.repeat(64), source: 'upload', name: null, files: input.length, bytes: 9 }, 'tidy');
    const d = { ...deps(pg.store, script), teams: { research: team }, inputWorkspace: async () => input };
    expect(await runSubagentJob(d, id, 'engineer-1', () => {})).toBe('completed');
    const { state, events } = await loadTask(pg.store, id);
    // The scratch file made and deleted within the agent's run was never the task's; README.md, deleted and written again, is changed.
    expect(state.agents['engineer-1']).toMatchObject({ status: 'completed', filesCreated: [], filesModified: ['README.md'], filesDeleted: ['docs/a.md', 'old.ts'] });
    expect(state.deletedFiles).toEqual(['docs/a.md', 'old.ts']);
    expect(state.artifacts.map((a) => a.path)).toEqual(['README.md']);
    expect(events.filter((e) => e.type === 'FileDeleted').map((e) => e.data)).toEqual([{ agentId: 'engineer-1', path: 'docs/a.md' }, { agentId: 'engineer-1', path: 'old.ts' }]);
    expect(JSON.parse(state.lead?.openToolUses.find((t) => t.toolUseId === 'tu1')?.result?.content ?? '{}')).toMatchObject({ filesDeleted: ['docs/a.md', 'old.ts'] });
    // The next agent starts from the task's files: the deleted ones are not there.
    await handleCommand(pg.store, id, { type: 'DispatchSubagent', agentId: 'engineer-2', agentType: 'engineer', toolUseId: 'tu2', prompt: 'look' });
    expect(await runSubagentJob({ ...d, model: look }, id, 'engineer-2', () => {})).toBe('completed');
    const listing = (await loadTask(pg.store, id)).events.filter((e) => e.type === 'ToolResultsRecorded' && e.data.agentId === 'engineer-2').flatMap((e) => (e.data as { results: { content: string }[] }).results)[0]?.content;
    expect(listing).toMatch(/--- stdout ---\n\.\/README\.md\n\.\/keep\.ts\n$/);
  });

  test.runIf(findBwrap() !== null)("modes: the workspace starts with the input's (an executable is one); a chmod is the task's change — recorded, in the next agent's workspace, the diff (old mode / new mode) and the tree", async ({ pg }) => {
    const { team, script } = withEngineer({ model: 'm', tools: ['run_command'] }, [
      [{ type: 'tool_use', id: 'c1', name: 'run_command', input: { command: "stat -c '%a %n' run.sh plain.sh gone.sh" } }],
      [{ type: 'tool_use', id: 'c2', name: 'run_command', input: { command: 'chmod +x plain.sh && chmod -x run.sh && rm gone.sh && printf "#!/bin/sh\\n" > new.sh && chmod 755 new.sh' } }],
    ]);
    const { script: look } = withEngineer({ model: 'm', tools: ['run_command'] }, [[{ type: 'tool_use', id: 'l1', name: 'run_command', input: { command: "stat -c '%a %n' run.sh plain.sh new.sh" } }]]);
    const input = [
      { path: 'gone.sh', mode: 0o755, content: Buffer.from('g\n') },
      { path: 'plain.sh', mode: 0o644, content: Buffer.from('p\n') },
      { path: 'run.sh', mode: 0o755, content: Buffer.from('r\n') },
    ];
    const stored = await storeWorkspace(pg.db.pool, input);
    const { id, workspace } = await engineerDispatched(pg.store, { digest: stored.digest, source: 'upload', name: null, files: input.length, bytes: 6 }, 'chmod');
    const d = { ...deps(pg.store, script), teams: { research: team }, inputWorkspace: async () => input };
    expect(await runSubagentJob(d, id, 'engineer-1', () => {})).toBe('completed');
    const outputs = async (agentId: string) => (await loadTask(pg.store, id)).events.filter((e) => e.type === 'ToolResultsRecorded' && e.data.agentId === agentId).flatMap((e) => (e.data as { results: { content: string }[] }).results.map((r) => r.content));
    expect((await outputs('engineer-1'))[0]).toMatch(/--- stdout ---\n755 run\.sh\n644 plain\.sh\n755 gone\.sh\n$/); // before: every file 644
    const { state } = await loadTask(pg.store, id);
    expect(state.agents['engineer-1']).toMatchObject({ filesCreated: ['new.sh'], filesModified: ['plain.sh', 'run.sh'], filesDeleted: ['gone.sh'] });
    expect(state.artifacts.map((a) => [a.path, a.mode])).toEqual([['new.sh', 0o755], ['plain.sh', 0o755], ['run.sh', 0o644]]);
    // The next agent starts from them.
    await handleCommand(pg.store, id, { type: 'DispatchSubagent', agentId: 'engineer-2', agentType: 'engineer', toolUseId: 'tu2', prompt: 'look' });
    expect(await runSubagentJob({ ...d, model: look }, id, 'engineer-2', () => {})).toBe('completed');
    expect((await outputs('engineer-2'))[0]).toMatch(/--- stdout ---\n644 run\.sh\n755 plain\.sh\n755 new\.sh\n$/);
    const task = { id, workspace, artifacts: state.artifacts, deletedFiles: state.deletedFiles };
    const { patch, files } = await taskChange(pg.db.pool, task);
    expect(files.map((f) => [f.path, f.status])).toEqual([['gone.sh', 'deleted'], ['new.sh', 'added'], ['plain.sh', 'modified'], ['run.sh', 'modified']]);
    expect(patch).toContain('diff --git a/gone.sh b/gone.sh\ndeleted file mode 100755\n');
    expect(patch).toContain('diff --git a/new.sh b/new.sh\nnew file mode 100755\n');
    expect(patch).toContain('diff --git a/plain.sh b/plain.sh\nold mode 100644\nnew mode 100755\n');
    expect(patch).toContain('diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100644\n');
    expect((await taskTree(pg.db.pool, task)).tree.map((f) => [f.path, f.mode])).toEqual([['new.sh', 0o755], ['plain.sh', 0o755], ['run.sh', 0o644]]);
  });

  test.runIf(findBwrap() !== null)('a configured engineer: its tools, test command and named env run in its sandbox; the sandbox is killed when it completes', async ({ pg }) => {
    const { team, script } = withEngineer({ model: 'm', tools: ['write_file', 'run_command', 'run_tests'], testCommand: 'node --test', sandbox: { network: false, env: ['BATON_PASSED_IN'], limits: { processes: 64 } } }, [
      [
        { type: 'tool_use', id: 'e1', name: 'write_file', input: { path: 'sum.test.mjs', content: "import test from 'node:test';\nimport assert from 'node:assert';\ntest('sum', () => assert.equal(1 + 2, 3));\n" } },
        { type: 'tool_use', id: 'e2', name: 'run_command', input: { command: 'echo "in=${BATON_PASSED_IN:-none} out=${BATON_NOT_PASSED:-none}"' } },
        { type: 'tool_use', id: 'e3', name: 'run_tests', input: {} },
      ],
    ]);
    const id = await dispatchedTask(pg.store, 'engineer', 'make the tests pass');
    const d = { ...deps(pg.store, script), teams: { research: team }, hostEnv: { BATON_PASSED_IN: 'yes', BATON_NOT_PASSED: 'secret' } };
    expect(await runSubagentJob(d, id, 'engineer-1', () => {})).toBe('completed');
    const { events, state } = await loadTask(pg.store, id);
    const results = events.filter((e) => e.type === 'ToolResultsRecorded' && e.streamId.startsWith('agent-')).flatMap((e) => (e.data as { results: { content: string; isError: boolean }[] }).results);
    expect(results[1]).toMatchObject({ isError: false, content: expect.stringMatching(/in=yes out=none/) });
    expect(results[2]).toMatchObject({ isError: false, content: expect.stringMatching(/^tests passed: 1 passed, 0 failed \(node-spec\)\n\$ node --test/) });
    expect(state.agents['engineer-1']?.filesCreated).toEqual(['sum.test.mjs']);
    expect((await pg.db.pool.query('select state from sandboxes where task_id = $1', [id])).rows).toEqual([{ state: 'killed' }]);
  });

  test.runIf(findBwrap() !== null)("a turn that runs tests is recorded before they run (the offline model too): the task shows 'running tests' meanwhile, not the turn before", async ({ pg }) => {
    // The test command waits for a file the test makes once it has seen the turn recorded.
    const { team, script } = withEngineer({ model: 'offline-engineer', tools: ['write_file', 'run_tests'], testCommand: 'while [ ! -f go ]; do sleep 0.05; done; echo "# pass 1"; echo "# fail 0"' }, [
      [{ type: 'tool_use', id: 'w1', name: 'write_file', input: { path: 'a.txt', content: 'a' } }],
      [{ type: 'tool_use', id: 't1', name: 'run_tests', input: {} }],
    ]);
    const id = await dispatchedTask(pg.store, 'engineer', 'run the tests');
    const job = runSubagentJob({ ...deps(pg.store, script), teams: { research: team } }, id, 'engineer-1', () => {});
    await waitFor(async () => {
      const { state } = await loadTask(pg.store, id);
      return loopOf(state, 'engineer-1')?.openToolUses.some((t) => t.name === 'run_tests' && t.state !== 'resolved') ?? false;
    }, { what: "the turn asking for run_tests recorded while the tests run" });
    await writeFile(path.join(root, id, 'engineer-1', 'go'), '');
    expect(await job).toBe('completed');
    const own = (await loadTask(pg.store, id)).events.filter((e) => e.streamId === agentStreamId(id, 'engineer-1')).map((e) => e.type);
    expect(own).toEqual(['SubagentStarted', 'ModelTurnRecorded', 'ToolResultsRecorded', 'ModelTurnRecorded', 'ToolResultsRecorded', 'ModelTurnRecorded']);
  });
});

describe('runSubagentJob on E2B (its fake) when E2B fails', () => {
  const fake = new FakeE2B();
  beforeAll(async () => {
    await fake.start();
  });
  afterAll(async () => fake.stop());

  test("E2B down for a while (503s) is waited out by the job — the agent runs once it is back; past SANDBOX_OUTAGE_LIMIT_MS the agent fails sandbox_unavailable; E2B refusing the key fails it at once, naming E2B_API_KEY (a 20-second outage or a wrong key had failed every agent)", async ({ pg }) => {
    const d = { ...deps(pg.store), sandboxes: new E2BSandboxProvider({ pool: pg.store.pool, apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url }) };
    const id = await dispatchedTask(pg.store);
    fake.fail('POST', /^\/v2\/sandboxes$/, 503, 2);
    expect(await runSubagentJob(d, id, 'researcher-1', () => {})).toBe('completed');
    expect((await loadTask(pg.store, id)).state.agents['researcher-1']).toMatchObject({ status: 'completed', attempt: 1 });

    const away = await dispatchedTask(pg.store);
    fake.fail('POST', /^\/v2\/sandboxes$/, 503, 1000);
    expect(await runSubagentJob({ ...d, sandboxOutageLimitMs: 1500 }, away, 'researcher-1', () => {})).toBe('failed');
    fake.clearFaults();
    expect((await loadTask(pg.store, away)).state.agents['researcher-1']?.error).toMatchObject({ code: 'sandbox_unavailable', message: expect.stringMatching(/^the sandbox service could not open the agent's sandbox for \d+ s \(\d+ tries; SANDBOX_OUTAGE_LIMIT_MS is 1500 ms\): given up\. Last error: E2B could not create the sandbox: Service temporarily unavailable/) });

    const refused = await dispatchedTask(pg.store);
    fake.fail('POST', /^\/v2\/sandboxes$/, 401);
    expect(await runSubagentJob(d, refused, 'researcher-1', () => {})).toBe('failed');
    expect((await loadTask(pg.store, refused)).state.agents['researcher-1']).toMatchObject({
      status: 'failed',
      error: { code: 'sandbox_refused', message: 'E2B refused the API key (E2B_API_KEY): Unauthorized, please check your credentials. - injected fault 401' },
    });
  });
});
