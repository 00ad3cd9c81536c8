import { randomUUID } from 'node:crypto';
import { builtinTeams, configVersion, ModelRejectedError, ModelUnavailableError, OfflineModel, PLAN_REMINDER, TeamCatalog, verifyRun, type TeamDefinition } from '@baton/agents';
import { loadTeamConfig, saveTeamConfigs } from '@baton/storage';
import { busNames, BusEvent, encodeEvent, ensureTopology, recordedFromBus } from '@baton/bus';
import { handleCommand, keepUnfinished, loadTask, servicesCachePolicy, TaskCache, type EventStore } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { pgTest, stackTest, waitFor } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { CURRENT_SCHEMA_VERSION } from '@baton/domain';
import { describe, expect } from 'vitest';
import { fireDueDeadlines } from './deadlines.ts';
import { advanceTask, cappedPlanSummary, type LeadDeps } from './lead.ts';
import { startOrchestrator } from './worker.ts';

const log = silentLogger();
const deps = (store: EventStore): LeadDeps => ({ store, model: new OfflineModel(), now: () => new Date(), log });

async function submit(store: EventStore, opts: { team?: string; requirePlanApproval?: boolean; prompt?: string; approvalTimeoutSeconds?: number } = {}): Promise<string> {
  const id = randomUUID();
  await handleCommand(store, id, {
    type: 'SubmitTask', prompt: opts.prompt ?? 'Research the history of event sourcing', team: opts.team ?? 'research',
    requirePlanApproval: opts.requirePlanApproval ?? opts.team !== 'bench',
    approvalTimeoutSeconds: opts.approvalTimeoutSeconds ?? 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null, workspace: null, budget: null,
  });
  return id;
}

describe('advanceTask (the lead loop)', () => {
  pgTest('bench team: 10 model turns, each one durable append, then completed', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'bench' });
    await advanceTask(deps(pg.store), id);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('completed');
    expect(events.filter((e) => e.type === 'ModelTurnRecorded')).toHaveLength(10);
    expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
    // One transaction per step: TaskStarted + turn 1 + its tool result, …, turn 10 + TaskCompleted.
    const txids = await pg.db.pool.query(`select count(distinct transaction_id)::int as n from events where task_id = $1`, [id]);
    expect(txids.rows[0].n).toBe(11); // submit + 10 steps
    const turn4 = events.find((e) => e.type === 'ModelTurnRecorded' && e.data.turn === 4);
    expect(turn4?.metadata.startedAt).toMatch(/^\d{4}-/);
  });

  pgTest("a lead whose model refuses fails the task with model_refused and the model's words (not a completed task with an empty summary)", async ({ pg }) => {
    const id = await submit(pg.store, { requirePlanApproval: false });
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const refusing = { name: 'no', complete: async () => ({ content: [{ type: 'text' as const, text: 'I cannot do that.' }], stopReason: 'refusal' as const, usage, model: 'm', offline: false }) };
    await advanceTask({ ...deps(pg.store), model: refusing }, id);
    const { state } = await loadTask(pg.store, id);
    expect(state).toMatchObject({ status: 'failed', error: { code: 'model_refused', message: "the lead's model refused to go on: I cannot do that." } });
    const other = await submit(pg.store, { requirePlanApproval: false });
    const rejecting = { name: 'rejects', complete: () => Promise.reject(new ModelRejectedError("the model's answer could not be read: usage.input_tokens: required")) };
    await advanceTask({ ...deps(pg.store), model: rejecting }, other);
    expect((await loadTask(pg.store, other)).state).toMatchObject({ status: 'failed', error: { code: 'model_error', message: "the lead's model call failed for good: the model's answer could not be read: usage.input_tokens: required" } });
  });

  pgTest("a lead whose model API cannot answer records each failed call and is asked again; once the outage has lasted the model's limit the task fails model_unavailable", async ({ pg }) => {
    const id = await submit(pg.store, { requirePlanApproval: false });
    const down = { name: 'down', outageLimitMs: 300_000, complete: () => Promise.reject(new ModelUnavailableError('the Messages API could not answer: 529 overloaded')) };
    await expect(advanceTask({ ...deps(pg.store), model: down }, id)).rejects.toBeInstanceOf(ModelUnavailableError);
    await expect(advanceTask({ ...deps(pg.store), model: down }, id)).rejects.toBeInstanceOf(ModelUnavailableError);
    let state = (await loadTask(pg.store, id)).state;
    expect(state).toMatchObject({ status: 'running', lead: { phase: 'model', turns: 0, modelOutage: { failures: 2, error: 'the Messages API could not answer: 529 overloaded' } } });
    // Five minutes later, still down: the task ends, saying for how long and why.
    await advanceTask({ ...deps(pg.store), model: down, now: () => new Date(Date.now() + 300_000) }, id);
    state = (await loadTask(pg.store, id)).state;
    expect(state).toMatchObject({ status: 'failed', error: { code: 'model_unavailable', message: expect.stringMatching(/^the lead's model could not answer for 5 min \(3 failed calls since \S+; ANTHROPIC_OUTAGE_LIMIT_MS is 300000 ms\): given up\. Last error: the Messages API could not answer: 529 overloaded$/) } });
    // A model that answers again in time ends the outage with its turn.
    const other = await submit(pg.store, { team: 'bench' });
    await expect(advanceTask({ ...deps(pg.store), model: down }, other)).rejects.toBeInstanceOf(ModelUnavailableError);
    await advanceTask(deps(pg.store), other);
    state = (await loadTask(pg.store, other)).state;
    expect(state.status).toBe('completed');
    expect(state.lead!.modelOutage).toBeUndefined();
  });

  pgTest('running it concurrently five times records each step exactly once (with and without the cache)', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'bench' });
    const cache = new TaskCache(pg.db.pool);
    await Promise.all(Array.from({ length: 5 }, (_, i) => advanceTask(i % 2 ? { ...deps(pg.store), load: cache.load } : deps(pg.store), id)));
    const { state, events } = await loadTask(pg.store, id);
    expect(state.status).toBe('completed');
    expect(events.filter((e) => e.type === 'ModelTurnRecorded').map((e) => (e.data as { turn: number }).turn)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(events.filter((e) => e.type === 'TaskCompleted')).toHaveLength(1);
  });

  pgTest('plan approval: the lead stops at awaiting_input holding nothing; approve → dispatch; reject → the lead re-plans with the reason', async ({ pg }) => {
    const id = await submit(pg.store);
    await advanceTask(deps(pg.store), id);
    let { state } = await loadTask(pg.store, id);
    expect(state.status).toBe('awaiting_input');
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'approval', toolName: 'Task', input: { agent: 'researcher' } });
    expect((req as { plan: string }).plan).toMatch(/Plan for/);
    await advanceTask(deps(pg.store), id); // nothing to do while waiting
    expect((await loadTask(pg.store, id)).state.version).toBe(state.version);

    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: req!.requestId, decision: 'approve', input: { agent: 'researcher', prompt: 'edited prompt' }, decidedBy: 'u' });
    await advanceTask(deps(pg.store), id);
    ({ state } = await loadTask(pg.store, id));
    expect(state.agents['researcher-1']).toMatchObject({ status: 'dispatched', prompt: 'edited prompt' });
    // The delegation's result, made when the work ends, tells the lead a person edited it (and what ran), as a call run on the spot does.
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'researcher-1', attempt: 1, runnerId: 'r' });
    await handleCommand(pg.store, id, { type: 'CompleteSubagent', agentId: 'researcher-1', attempt: 1, summary: 'notes written', filesCreated: ['notes.md'], filesModified: [], success: true, iterationCapReached: false });
    await advanceTask(deps(pg.store), id);
    const delegated = (await loadTask(pg.store, id)).events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => (e.data as { results: { toolUseId: string; content: string }[] }).results).find((r) => r.toolUseId === (req as { toolUseId: string }).toolUseId);
    expect(delegated?.content).toBe('[a person edited this call before approving it; it ran with: {"agent":"researcher","prompt":"edited prompt"}]\n{"summary":"notes written","filesCreated":["notes.md"],"filesModified":[],"success":true}');

    const id2 = await submit(pg.store);
    await advanceTask(deps(pg.store), id2);
    const req2 = Object.values((await loadTask(pg.store, id2)).state.pendingRequests)[0]!;
    // Rejected with a reason: the lead re-plans with it and asks again (up to three times, then it stops).
    const reject = async (reason: string) => {
      const open = Object.values((await loadTask(pg.store, id2)).state.pendingRequests)[0]!;
      await handleCommand(pg.store, id2, { type: 'DecideApproval', requestId: open.requestId, decision: 'reject', reason, decidedBy: 'u' });
      await advanceTask(deps(pg.store), id2);
      return (await loadTask(pg.store, id2)).state;
    };
    const again = await reject('too broad, only open-source databases');
    expect(again.status).toBe('awaiting_input');
    const revised = Object.values(again.pendingRequests)[0];
    expect(revised).toMatchObject({ kind: 'approval', requestId: expect.not.stringMatching(req2.requestId), plan: expect.stringMatching(/Revised plan, taking your feedback into account \(too broad, only open-source databases\)/), input: { agent: 'researcher', prompt: expect.stringMatching(/revised after feedback: too broad, only open-source databases/) } });
    expect((await reject('still too broad')).status).toBe('awaiting_input');
    expect((await reject('no')).status).toBe('awaiting_input');
    const done = await reject('stop');
    expect(done.status).toBe('completed');
    expect(done.result?.summary).toMatch(/rejected the plan: stop/);
    expect(done.agents).toEqual({});
  });

  pgTest('bench team with plan approval: turn 3\'s bench_gate waits for a person; approval resumes at turn 4', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'bench', requirePlanApproval: true });
    await advanceTask(deps(pg.store), id);
    let { state } = await loadTask(pg.store, id);
    expect(state.status).toBe('awaiting_input');
    expect(state.lead?.turns).toBe(3);
    const [req] = Object.values(state.pendingRequests);
    expect(req).toMatchObject({ kind: 'approval', toolName: 'bench_gate', onTimeout: 'reject' });
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: req!.requestId, decision: 'approve', decidedBy: 'u' });
    await advanceTask(deps(pg.store), id);
    ({ state } = await loadTask(pg.store, id));
    expect(state).toMatchObject({ status: 'completed', lead: { turns: 10 } });
  });

  pgTest("woken by the approval's event, the lead goes on from what its process knows (no read); if the task moved meanwhile, its append conflicts and it reads", async ({ pg }) => {
    const reads = { n: 0 };
    const cache = new TaskCache({ query: ((...args: unknown[]) => ((reads.n += 1), (pg.db.pool.query as (...a: unknown[]) => unknown)(...args))) as typeof pg.db.pool.query }, servicesCachePolicy);
    const known = { ...deps(pg.store), load: cache.load, known: cache };
    const park = async () => {
      const id = await submit(pg.store, { team: 'bench', requirePlanApproval: true });
      await advanceTask(known, id);
      const { state } = await loadTask(pg.store, id);
      expect(state.status).toBe('awaiting_input');
      const approved = await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: Object.keys(state.pendingRequests)[0]!, decision: 'approve', decidedBy: 'u' });
      // As the orchestrator receives it: the event through its bus message.
      return { id, woken: recordedFromBus(BusEvent.parse(JSON.parse(new TextDecoder().decode(encodeEvent(approved.events[0]!)))), String(CURRENT_SCHEMA_VERSION)) };
    };

    const a = await park();
    const before = reads.n;
    await advanceTask(known, a.id, a.woken);
    expect(reads.n).toBe(before);
    expect(cache.advanced).toBe(1);
    expect((await loadTask(pg.store, a.id)).state).toMatchObject({ status: 'completed', lead: { turns: 10 } });

    // The task is cancelled after the approval, before the lead takes turn 4: what it knows is
    // one event behind the approval, so it is applied; turn 4's append conflicts; the lead reads and stops.
    const b = await park();
    await handleCommand(pg.store, b.id, { type: 'CancelTask', reason: 'changed my mind', requestedBy: 'u' });
    const beforeB = reads.n;
    await advanceTask(known, b.id, b.woken);
    expect(cache.advanced).toBe(2);
    expect(reads.n).toBe(beforeB + 1);
    const { state, events } = await loadTask(pg.store, b.id);
    expect(state).toMatchObject({ status: 'cancelled', lead: { turns: 3 } });
    expect(events.at(-1)?.type).toBe('TaskCancelled');

    // A finished task's submission, replayed long after (a relay rewound after the bus lost its
    // streams): the process dropped the task as finished, so it reads it instead of starting it again.
    const c = await submit(pg.store, { team: 'bench' });
    const submitted = (await loadTask(pg.store, c)).events[0]!;
    await advanceTask(known, c, submitted);
    const done = await loadTask(pg.store, c);
    expect(done.state.status).toBe('completed');
    const [beforeC, advancedC] = [reads.n, cache.advanced];
    await advanceTask(known, c, submitted);
    expect([reads.n, cache.advanced]).toEqual([beforeC + 1, advancedC]);
    expect((await loadTask(pg.store, c)).events).toHaveLength(done.events.length);
  });

  pgTest('a vague prompt: the lead asks (awaiting_input); the answer is the result of that exact tool_use, then it plans', async ({ pg }) => {
    const id = await submit(pg.store, { prompt: 'AI stuff' });
    await advanceTask(deps(pg.store), id);
    let loaded = await loadTask(pg.store, id);
    expect(loaded.state.status).toBe('awaiting_input');
    const [ask] = Object.values(loaded.state.pendingRequests);
    expect(ask).toMatchObject({ kind: 'clarification', agentId: 'lead', questions: expect.arrayContaining([expect.stringMatching(/Who is the report for/)]) });
    expect(ask?.deadline).toBeDefined();
    // Another answer first: still too vague → the lead asks again (multi-round).
    await handleCommand(pg.store, id, { type: 'AnswerClarification', requestId: ask!.requestId, answers: ['dunno'], answeredBy: 'u' });
    await advanceTask(deps(pg.store), id);
    loaded = await loadTask(pg.store, id);
    const [again] = Object.values(loaded.state.pendingRequests);
    expect(again).toMatchObject({ kind: 'clarification', questions: [expect.stringMatching(/more specific/)] });
    await handleCommand(pg.store, id, { type: 'AnswerClarification', requestId: again!.requestId, answers: ['vector databases for a CTO, two pages'], answeredBy: 'u' });
    await advanceTask(deps(pg.store), id);
    loaded = await loadTask(pg.store, id);
    const [plan] = Object.values(loaded.state.pendingRequests);
    expect(plan).toMatchObject({ kind: 'approval', toolName: 'Task', input: { prompt: expect.stringMatching(/vector databases for a CTO/) } });
    // Every tool_use of the lead is followed by exactly its tool_result.
    const results = loaded.events.filter((e) => e.type === 'ToolResultsRecorded').flatMap((e) => (e.data as { results: { toolUseId: string }[] }).results.map((r) => r.toolUseId));
    expect(results).toEqual([ask, again].map((r) => (r?.kind === 'clarification' ? r.toolUseId : null)));
  });

  pgTest('a clear prompt proceeds with no question', async ({ pg }) => {
    const id = await submit(pg.store);
    await advanceTask(deps(pg.store), id);
    const { events } = await loadTask(pg.store, id);
    expect(events.some((e) => e.type === 'ClarificationRequested')).toBe(false);
  });

  pgTest('deadlines: the poller records ApprovalTimedOut (reject) from the deadline table; the lead sees the rejection', async ({ pg }) => {
    const id = await submit(pg.store, { approvalTimeoutSeconds: 600 });
    const other = await submit(pg.store, { approvalTimeoutSeconds: 3600 });
    await advanceTask(deps(pg.store), id);
    await advanceTask(deps(pg.store), other);
    const row = await pg.db.pool.query('select next_deadline from tasks where id = $1', [id]);
    const deadline = row.rows[0].next_deadline as Date;
    expect(deadline.getTime()).toBe(Date.parse(Object.values((await loadTask(pg.store, id)).state.pendingRequests)[0]!.deadline as string));
    const dl = { pool: pg.db.pool, store: pg.store, load: (t: string) => loadTask(pg.store, t), log };
    expect(await fireDueDeadlines({ ...dl, now: () => new Date(deadline.getTime() - 1000) })).toBe(0);
    const later = () => new Date(deadline.getTime() + 1000);
    expect(await fireDueDeadlines({ ...dl, now: later })).toBe(1); // only the task whose deadline passed
    expect(await fireDueDeadlines({ ...dl, now: later })).toBe(0); // fired once
    const timedOut = (await loadTask(pg.store, id)).events.filter((e) => e.type === 'ApprovalTimedOut');
    expect(timedOut).toHaveLength(1);
    expect(timedOut[0]?.metadata.actor).toBe('baton:deadline');
    expect((await pg.db.pool.query('select next_deadline from tasks where id = $1', [id])).rows[0].next_deadline).toBeNull();
    await advanceTask(deps(pg.store), id);
    expect((await loadTask(pg.store, id)).state).toMatchObject({ status: 'completed', result: { summary: expect.stringMatching(/^\[offline model\] Nobody decided on the plan before its deadline\. I will stop here/) } });
    expect((await loadTask(pg.store, other)).state.status).toBe('awaiting_input');
  });

  pgTest('a cancelled task drops its deadline', async ({ pg }) => {
    const id = await submit(pg.store);
    await advanceTask(deps(pg.store), id);
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'no longer needed', requestedBy: 'u' });
    expect((await pg.db.pool.query('select next_deadline from tasks where id = $1', [id])).rows[0].next_deadline).toBeNull();
  });

  pgTest('with a real model (seconds per call) the start is committed first, so the task shows running during the first call', async ({ pg }) => {
    const id = await submit(pg.store, { requirePlanApproval: false });
    const seen: string[] = [];
    const offline = new OfflineModel();
    const watching = { name: 'claude-like', complete: async (r: Parameters<OfflineModel['complete']>[0]) => { seen.push((await loadTask(pg.store, id)).state.status); return offline.complete(r); } };
    await advanceTask({ ...deps(pg.store), model: watching }, id);
    expect(seen[0]).toBe('running');
    // A real model's turn that only delegates is made durable before its delegations are recorded:
    // it is paid for, and whatever recording them meets cannot send it to the model again.
    const rows = (await pg.db.pool.query(`select type, transaction_id::text as tx from events where task_id = $1 order by global_position`, [id])).rows as { type: string; tx: string }[];
    const turn = rows.find((r) => r.type === 'ModelTurnRecorded')!;
    const dispatch = rows.find((r) => r.type === 'SubagentDispatched')!;
    expect(turn.tx).not.toBe(dispatch.tx);
  });

  pgTest("a lead that submits its plan on its last allowed turn: once the plan completes the task completes with the plan's outcome (it used to fail max_turns with the work done); capped without a plan it fails max_turns", async ({ pg }) => {
    const eng = builtinTeams.engineering as TeamDefinition;
    const team: TeamDefinition = { ...eng, lead: { ...eng.lead, maxTurns: 1 } };
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const plan = { summary: 'add a report', subtasks: [{ id: 'api', agent: 'backend-engineer', description: 'the API', file_locks: ['api/**'] }] };
    const planner = { name: 'm', complete: async () => ({ content: [{ type: 'tool_use' as const, id: 'p', name: 'submit_plan', input: plan }], stopReason: 'tool_use' as const, usage, model: 'm', offline: false }) };
    const d = { ...deps(pg.store), model: planner, teams: { engineering: team } };
    const id = await submit(pg.store, { team: 'engineering', requirePlanApproval: false, prompt: 'add a low-stock report' });
    await advanceTask(d, id);
    // The runner's part, as the domain sees it: the engineer and then the reviewer finish.
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'api', attempt: 1, runnerId: 'r' });
    await handleCommand(pg.store, id, { type: 'CompleteSubagent', agentId: 'api', attempt: 1, summary: 'added GET /report', filesCreated: ['api/report.ts'], filesModified: [], success: true, iterationCapReached: false, tests: { passed: 3, failed: 0, skipped: 0 } });
    await advanceTask(d, id); // schedules the review
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'review-1', attempt: 1, runnerId: 'r' });
    await handleCommand(pg.store, id, { type: 'RecordReview', agentId: 'review-1', round: 0, verdict: 'approve', issues: [], summary: 'clean and tested' });
    await handleCommand(pg.store, id, { type: 'CompleteSubagent', agentId: 'review-1', attempt: 1, summary: 'approved', filesCreated: [], filesModified: [], success: true, iterationCapReached: false });
    await advanceTask(d, id);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.plan?.status).toBe('completed');
    expect(state).toMatchObject({ status: 'completed', result: { summary: cappedPlanSummary(state.plan!, 1) } });
    expect(state.result?.summary).toBe(
      "The lead reached its limit of 1 turn before its final answer; its plan completed. Plan: add a report\n- api (backend-engineer): done — added GET /report\nReview (review-1): approve — clean and tested",
    );
    expect(events.at(-1)).toMatchObject({ type: 'TaskCompleted', data: { leadCapped: true } });
    // The determinism check makes the same decision (it had reported the completion as a divergence).
    expect(verifyRun(events, team)).toMatchObject({ identical: true });
    // The domain holds it to a completed plan: a capped lead with none cannot complete so.
    const other = await submit(pg.store, { team: 'engineering', requirePlanApproval: false, prompt: 'add a low-stock report' });
    await handleCommand(pg.store, other, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'engineering-lead', configVersion: 'v' });
    await expect(handleCommand(pg.store, other, { type: 'CompleteTask', summary: 's', reportPath: null, leadCapped: true })).rejects.toThrow(/only once its plan completed \(plan none, lead phase model\)/);
    // Capped with nothing to show: max_turns, as before.
    const talker = { name: 'm', complete: async () => ({ content: [{ type: 'tool_use' as const, id: 'q', name: 'bench_step', input: { step: 1 } }], stopReason: 'tool_use' as const, usage, model: 'm', offline: false }) };
    const bench = builtinTeams.bench as TeamDefinition;
    const third = await submit(pg.store, { team: 'bench' });
    await advanceTask({ ...deps(pg.store), model: talker, teams: { bench: { ...bench, lead: { ...bench.lead, maxTurns: 1 } } } }, third);
    expect((await loadTask(pg.store, third)).state).toMatchObject({ status: 'failed', error: { code: 'max_turns', message: 'the lead reached its limit of 1 turn' } });
  });

  pgTest('an engineering lead that answers with a plan in prose (no submit_plan) is reminded once: then it plans; one that answers again completes with its words', async ({ pg }) => {
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const plan = { summary: 'add a report', subtasks: [{ id: 'api', agent: 'backend-engineer', description: 'the API', file_locks: ['api/**'] }] };
    const lead = (obeys: boolean) => ({
      name: 'm',
      complete: async (req: { messages: { role: string; content: unknown }[] }) => {
        const reminded = req.messages.at(-1)?.content === PLAN_REMINDER;
        if (reminded && obeys) return { content: [{ type: 'tool_use' as const, id: 'p', name: 'submit_plan', input: plan }], stopReason: 'tool_use' as const, usage, model: 'm', offline: false };
        return { content: [{ type: 'text' as const, text: reminded ? 'No change is needed: the report exists.' : 'Plan: 1. add the API. 2. test it.' }], stopReason: 'end_turn' as const, usage, model: 'm', offline: false };
      },
    });
    for (const obeys of [true, false]) {
      const id = await submit(pg.store, { team: 'engineering', requirePlanApproval: false, prompt: 'add a low-stock report' });
      await advanceTask({ ...deps(pg.store), model: lead(obeys) }, id);
      const { state, events } = await loadTask(pg.store, id);
      expect(events.filter((e) => e.type === 'AgentReminded').map((e) => e.data)).toEqual([{ agentId: 'lead', text: PLAN_REMINDER }]);
      if (obeys) expect(state).toMatchObject({ status: 'running', plan: { status: 'running', summary: 'add a report' }, lead: { reminders: 1, turns: 2 } });
      else expect(state).toMatchObject({ status: 'completed', plan: null, result: { summary: 'No change is needed: the report exists.' } });
    }
    // A research lead (no submit_plan) is not reminded of plans.
    const research = await submit(pg.store, { requirePlanApproval: false });
    await advanceTask({ ...deps(pg.store), model: { name: 'm', complete: async () => ({ content: [{ type: 'text' as const, text: 'done' }], stopReason: 'end_turn' as const, usage, model: 'm', offline: false }) } }, research);
    expect((await loadTask(pg.store, research)).state).toMatchObject({ status: 'completed', result: { summary: 'done' } });
  });

  pgTest("a task of a team this orchestrator has not loaded (a rolling update adding it: the gateway had) starts on the configuration it was accepted with, recorded by the gateway", async ({ pg }) => {
    const bench2: TeamDefinition = { ...(builtinTeams.bench as TeamDefinition), id: 'bench2' };
    await saveTeamConfigs(pg.db.pool, [{ version: configVersion(bench2), teamId: 'bench2', definition: bench2 }]);
    const id = randomUUID();
    await handleCommand(pg.store, id, {
      type: 'SubmitTask', prompt: 'bench', team: 'bench2', configVersion: configVersion(bench2), requirePlanApproval: false,
      approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null, workspace: null, budget: null,
    });
    await advanceTask({ ...deps(pg.store), catalog: new TeamCatalog(builtinTeams, (v) => loadTeamConfig(pg.db.pool, v)) }, id);
    const { state } = await loadTask(pg.store, id);
    expect(state).toMatchObject({ status: 'completed', lead: { configVersion: configVersion(bench2) } });
  });

  pgTest('an unknown team fails the task visibly', async ({ pg }) => {
    const id = await submit(pg.store, { team: 'ghosts' });
    await advanceTask(deps(pg.store), id);
    expect((await loadTask(pg.store, id)).state).toMatchObject({ status: 'failed', error: { code: 'unknown_team' } });
  });
});

describe('startOrchestrator', () => {
  stackTest('the deadline timer fires a 1 s approval timeout with no per-task timer (one timer, hinted by the step that opened the request)', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const orch = await startOrchestrator({
      ...deps(pg.store), load: new TaskCache(pg.db.pool).load, pool: pg.db.pool, nc: nats.nc, js: jetstream(nats.nc), names, concurrency: 8, maxAttempts: 5,
      relay: { enabled: true, batchSize: 100, backstopMs: 30_000 }, deadlineBackstopMs: 60_000,
    });
    try {
      const id = await submit(pg.store, { approvalTimeoutSeconds: 1 });
      // The backstop is a minute: only the hint from the opened request can make this fire in time.
      await waitFor(async () => (await loadTask(pg.store, id)).state.status === 'completed', { timeoutMs: 20_000, what: 'the approval to time out and the lead to finish' });
      const { events } = await loadTask(pg.store, id);
      expect(events.map((e) => e.type)).toContain('ApprovalTimedOut');
    } finally {
      await orch.stop();
    }
  });

  stackTest("a cancel aborts the lead's model call in flight (it ran on to be refused, paid for); the trigger is settled, not retried", async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    let calls = 0;
    let aborted: unknown = null;
    // A model that answers only when its caller gives up: the call is in flight until aborted.
    const hanging = {
      name: 'slow',
      complete: (req: { signal?: AbortSignal }) =>
        new Promise<never>((_resolve, reject) => {
          calls++;
          req.signal?.addEventListener('abort', () => ((aborted = req.signal?.reason), reject(new Error('aborted by the caller'))), { once: true });
        }),
    };
    const orch = await startOrchestrator({
      ...deps(pg.store), model: hanging, pool: pg.db.pool, nc: nats.nc, js: jetstream(nats.nc), names, concurrency: 8, maxAttempts: 5,
      relay: { enabled: true, batchSize: 100, backstopMs: 30_000 },
    });
    try {
      const id = await submit(pg.store, { requirePlanApproval: false });
      await waitFor(() => calls === 1, { what: "the lead's first model call" });
      await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'no longer needed', requestedBy: 'u' });
      await waitFor(() => aborted !== null, { what: 'the model call to be aborted' });
      expect(String((aborted as Error).message)).toMatch(/TaskCancelled/);
      await waitFor(async () => (await (await jetstreamManager(nats.nc)).consumers.info(names.eventsStream, names.consumers.orchestrator)).num_ack_pending === 0 && orch.consumer.inFlight === 0, { what: 'the trigger settled' });
      expect(calls).toBe(1);
      const { state, events } = await loadTask(pg.store, id);
      expect(state.status).toBe('cancelled');
      expect(events.map((e) => e.type)).not.toContain('ModelTurnRecorded');
      expect((await pg.db.pool.query('select count(*)::int as n from dead_letters')).rows[0].n).toBe(0);
    } finally {
      await orch.stop();
    }
  });

  stackTest('a parked task cancelled at the gateway leaves the cache: the orchestrator drops it when it hears the end (it never loads it again)', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const cache = new TaskCache(pg.db.pool, servicesCachePolicy);
    const orch = await startOrchestrator({
      ...deps(pg.store), load: cache.load, known: cache, ended: (id) => cache.ended(id), pool: pg.db.pool, nc: nats.nc, js: jetstream(nats.nc), names, concurrency: 2, maxAttempts: 5,
      relay: { enabled: true, batchSize: 100, backstopMs: 30_000 },
    });
    try {
      const id = await submit(pg.store, { team: 'bench', requirePlanApproval: true });
      await waitFor(async () => (await loadTask(pg.store, id)).state.status === 'awaiting_input', { what: 'the plan waiting for approval' });
      await waitFor(() => cache.size === 1, { what: 'the parked task cached' });
      await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' }); // as the gateway does: the relay tells the rest
      await waitFor(() => cache.size === 0, { what: 'the cancelled task dropped from the cache' });
      // Remembered as finished: its old first event, redelivered, does not start it again in the cache.
      expect(cache.advance(id, { id: randomUUID(), type: 'TaskSubmitted', taskId: id, streamId: `task-${id}`, version: 1, position: 1n, recordedAt: new Date().toISOString(), data: { forkedFrom: null }, metadata: {} } as never)).toBeNull();
    } finally {
      await orch.stop();
    }
  });

  stackTest('relay + consumer drive submitted bench tasks to completion (each started from the event that woke it); redelivered triggers are harmless; finished tasks are not kept in memory', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const cache = new TaskCache(pg.db.pool, { keep: keepUnfinished });
    const orch = await startOrchestrator({
      ...deps(pg.store), load: cache.load, known: cache, ended: (id) => cache.ended(id), pool: pg.db.pool, nc: nats.nc, js: jetstream(nats.nc), names, concurrency: 8, maxAttempts: 5,
      relay: { enabled: true, batchSize: 100, backstopMs: 30_000 },
    });
    const ids = await Promise.all(Array.from({ length: 20 }, () => submit(pg.store, { team: 'bench' })));
    await waitFor(async () => {
      const r = await pg.db.pool.query(`select count(*)::int as n from tasks where status = 'completed'`);
      return r.rows[0].n === 20;
    }, { timeoutMs: 30_000, what: '20 completed tasks' });
    await waitFor(() => cache.size === 0, { what: 'finished tasks to leave the cache' });
    // Each task's first trigger carried its first event: the lead started from it without reading.
    expect(cache.advanced).toBeGreaterThanOrEqual(20);
    // Re-publish every TaskSubmitted as if JetStream redelivered it long after the dedupe window.
    const js = jetstream(nats.nc);
    for (const id of ids) await js.publish(names.triggerSubject(id, 'TaskSubmitted'), JSON.stringify({ id: randomUUID(), type: 'TaskSubmitted', taskId: id, streamId: `task-${id}`, version: 1, position: 1, recordedAt: new Date().toISOString(), data: {}, metadata: {} }));
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).consumers.info(names.eventsStream, names.consumers.orchestrator)).num_ack_pending === 0 && orch.consumer.inFlight === 0, { what: 'redeliveries handled' });
    await orch.stop();
    for (const id of ids) {
      const { events } = await loadTask(pg.store, id);
      expect(events.filter((e) => e.type === 'ModelTurnRecorded')).toHaveLength(10);
      expect(events.filter((e) => e.type === 'TaskCompleted')).toHaveLength(1);
    }
  });
});
