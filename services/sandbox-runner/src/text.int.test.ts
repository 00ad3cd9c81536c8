import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinTeams, type ModelClient, type ModelResponse, type TeamDefinition } from '@baton/agents';
import { handleCommand, loadTask } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { LocalSandboxProvider } from '@baton/sandbox';
import { pgTest as test } from '@baton/testing';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { runSubagentJob } from './subagent.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-text-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const reply = (content: ModelResponse['content'], stopReason: ModelResponse['stopReason'] = 'tool_use'): ModelResponse => ({ content, stopReason, usage, model: 'scripted', offline: true });

describe('text Postgres cannot store, from places no person typed', () => {
  test('NUL in a command output and in a file the agent reads, NUL and a lone surrogate in a model reply: replaced (and said so), and the run goes on to completion', async ({ pg }) => {
    const research = builtinTeams.research as TeamDefinition;
    const researcher = research.agents.researcher as NonNullable<TeamDefinition['agents'][string]>;
    const team: TeamDefinition = { ...research, agents: { ...research.agents, researcher: { ...researcher, tools: [...researcher.tools, 'run_command'] } } };
    const script = [
      reply([{ type: 'text', text: 'thinking a\u0000b \ud800' }, { type: 'tool_use', id: 't1', name: 'run_command', input: { command: "printf 'out\\000put'; printf 'x\\000y' > bad.md" } }]),
      reply([{ type: 'tool_use', id: 't2', name: 'read_file', input: { path: 'bad.md' } }]),
      reply([{ type: 'tool_use', id: 't3', name: 'write_file', input: { path: 'n.md', content: 'a\u0000b' } }]),
      reply([{ type: 'text', text: 'done' }], 'end_turn'),
    ];
    let i = 0;
    const model: ModelClient = { name: 'scripted', complete: async () => script[i++] as ModelResponse };
    const id = randomUUID();
    await handleCommand(pg.store, id, { type: 'SubmitTask', prompt: 'topic', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
    await handleCommand(pg.store, id, { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'go' } }], usage });
    await handleCommand(pg.store, id, { type: 'DispatchSubagent', agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'go' });

    const outcome = await runSubagentJob({ store: pg.store, model, teams: { research: team }, sandboxes: new LocalSandboxProvider({ root, pool: pg.db.pool }), runnerId: 'r', now: () => new Date(), log: silentLogger() }, id, 'researcher-1', () => {});
    expect(outcome).toBe('completed');
    const { events, state } = await loadTask(pg.store, id);
    expect(state.agents['researcher-1']?.status).toBe('completed');
    const turn1 = events.find((e) => e.type === 'ModelTurnRecorded' && e.data.agentId === 'researcher-1');
    expect(turn1?.data).toMatchObject({ content: [{ type: 'text', text: 'thinking a\u2400b \ufffd' }, expect.anything()] });
    expect(turn1?.metadata).toMatchObject({ textReplaced: 2 });
    const results = events.flatMap((e) => (e.type === 'ToolResultsRecorded' ? e.data.results : []));
    expect(results[0]?.content).toMatch(/out\u2400put[\s\S]*\[baton: 1 character that cannot be stored/);
    expect(results[1]?.content).toMatch(/x\u2400y[\s\S]*\[baton: 1 character that cannot be stored/);
    // A NUL the model wrote into a file is ␀ there (its turn is stored so): the write says so (it said only "created n.md (5 bytes)").
    expect(results[2]?.content).toMatch(/^created n\.md \(5 bytes\)\n\[baton: the text written holds \u2400 \(U\+2400\): a NUL in a model's text is stored as \u2400/);
  });
});
