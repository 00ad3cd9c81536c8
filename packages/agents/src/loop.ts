import {
  budgetHold,
  canonicalJson,
  cleanText,
  cutText,
  isFinal,
  NUL_REPLACEMENT,
  loopOf,
  MAX_REMINDERS,
  modelOutageOver,
  oneLine,
  textOf,
  withinLocks,
  type AgentLoopState,
  type Command,
  type EventMetadata,
  type ModelOutage,
  type OpenToolUse,
  type RecordedEvent,
  type TaskState,
  type ToolResult,
} from '@baton/domain';
import { inSpan, metrics, SpanKind, SpanStatusCode, type Span } from '@baton/telemetry';
import { buildConversation } from './conversation.ts';
import { ModelRejectedError, ModelUnavailableError, type ModelClient, type ModelResponse } from './model.ts';
import { approvalFor, askPerson } from './policy.ts';
import type { AgentDefinition, TeamDefinition } from './teams.ts';
import { allTools, parseToolInput, planSubtasksOf, submitPlanTool, submitReviewTool, toolSpec } from './tools.ts';
import { fileAccessViolation, writePolicyOf } from './files.ts';

/**
 * The agent loop — one, for the lead and every subagent. It reads where the agent stands from
 * the task's folded state (its phase and open tool uses), and moves it on: triage the open tool
 * uses (run here, ask a person, delegate, or wait), record the results, call the model, record
 * the turn, and finish. Everything it decides is a command, recorded through `decide` by the
 * host. The orchestrator hosts the lead's loop (lead tools, delegation, task stream); the runner
 * hosts a subagent's (its sandbox, its own stream, fencing by attempt).
 */

export type ToolCall = { id: string; name: string; input: Record<string, unknown> };

type AskCommand = Extract<Command, { type: 'RequestApproval' | 'RequestClarification' }>;
type DispatchCommand = Extract<Command, { type: 'DispatchSubagent' | 'RecordPlan' }>;

export interface Triage {
  /** Results known now: errors, and outcomes a person's decision or a subagent already gave. */
  results: ToolResult[];
  /** Calls to run here, with their parsed (or approved) input; `edited`: a person approved it with another input. */
  runs: { call: ToolCall; input: Record<string, unknown>; edited?: boolean }[];
  /** Requests a person must decide before the calls can go on. */
  asks: AskCommand[];
  /** Subagents to start, or a plan to run (the lead's delegations). */
  dispatches: DispatchCommand[];
  /** Some call already waits on a person or a subagent. */
  waiting: boolean;
}

export interface TriageInput {
  state: TaskState;
  agentId: string;
  team: TeamDefinition;
  def: AgentDefinition;
  /** Where the host runs tools: the orchestrator (the lead's local tools) or the runner (sandbox tools). */
  runsIn: 'orchestrator' | 'runner';
  now: Date;
  /** What a person is shown for an approval of this call. */
  plan: (call: ToolCall) => string;
}

/** Request ids name the asking agent and its tool use (tool-use ids are unique per agent, not per task). */
export const requestIdFor = (kind: 'approval' | 'clarification', agentId: string, toolUseId: string): string => `${kind === 'approval' ? 'apr' : 'clr'}-${agentId}-${toolUseId}`;

/**
 * A plan's review whose issues name files no subtask's locks hold: no engineer could change them,
 * and each went to every subtask that changed files, a round of changes spent on nothing. The
 * reviewer is told which, to name a file a subtask holds or none (a general issue). Null: none.
 */
export function reviewFileProblem(state: TaskState, agentId: string, input: Record<string, unknown>): string | null {
  const plan = state.plan;
  if (!plan || state.agents[agentId]?.role !== 'review') return null;
  const issues = (input.issues ?? []) as { file?: string | null }[];
  const unheld = issues.flatMap((issue, i) => (typeof issue.file === 'string' && !plan.subtasks.some((t) => withinLocks(issue.file as string, t.fileLocks)) ? [{ i, file: issue.file }] : []));
  if (unheld.length === 0) return null;
  const locks = [...new Set(plan.subtasks.flatMap((t) => t.fileLocks))].join(', ');
  return `not recorded: ${unheld.map((x) => `issues.${x.i}.file '${x.file}'`).join(', ')} ${unheld.length === 1 ? 'is' : 'are'} no subtask's to change (their locks: ${locks}); name a file a subtask holds, or give no file for an issue about the change as a whole, and call submit_review again`;
}

/**
 * Decide, for each open tool use of an agent, what happens to it. Pure: the same state gives
 * the same triage, so a step re-run after a crash or a conflict makes the same decisions.
 */
export function triageToolUses(o: TriageInput): Triage {
  const loop = loopOf(o.state, o.agentId);
  const out: Triage = { results: [], runs: [], asks: [], dispatches: [], waiting: false };
  if (!loop) return out;
  const dispatched = new Map<string, number>();
  for (const a of Object.values(o.state.agents)) dispatched.set(a.type, (dispatched.get(a.type) ?? 0) + 1);
  const deadline = new Date(o.now.getTime() + o.state.approvalTimeoutSeconds * 1000).toISOString();
  // One plan, one review per turn: the turn's first valid submit_plan (submit_review) call is the
  // plan (the verdict); another is answered, not recorded. (An invalid one is answered its errors.)
  const firstValid = (name: string): string | undefined => {
    const tool = allTools[name];
    const valid = (t: OpenToolUse): boolean => {
      const parsed = tool ? parseToolInput(tool, t.approvedInput ?? t.input, o.team) : null;
      return parsed?.ok === true && (name !== submitReviewTool.name || reviewFileProblem(o.state, o.agentId, parsed.value) === null);
    };
    return tool && o.def.tools.includes(name) ? loop.openToolUses.find((t) => t.name === name && valid(t))?.toolUseId : undefined;
  };
  const firstPlan = firstValid(submitPlanTool.name);
  const firstReview = firstValid(submitReviewTool.name);
  // A question to the person in this turn: nothing is delegated before the answer (it could change what to delegate).
  const asking = loop.openToolUses.find((t) => {
    const tool = allTools[t.name];
    return t.state !== 'resolved' && tool?.runsIn === 'person' && o.def.tools.includes(t.name) && parseToolInput(tool, t.input, o.team).ok;
  })?.name;

  for (const t of loop.openToolUses) {
    if (t.state === 'resolved') continue; // its result is in the state already
    if (t.state !== 'pending') {
      out.waiting = true;
      continue;
    }
    const error = (content: string): void => void out.results.push({ toolUseId: t.toolUseId, toolName: t.name, content, isError: true });
    const tool = allTools[t.name];
    if (!tool || !o.def.tools.includes(t.name)) {
      error(`tool '${t.name}' is not available to this agent; available: ${o.def.tools.join(', ')}`);
      continue;
    }
    const parsed = parseToolInput(tool, t.approvedInput ?? t.input, o.team);
    if (!parsed.ok) {
      error(parsed.error);
      continue;
    }
    const unheld = tool.name === submitReviewTool.name ? reviewFileProblem(o.state, o.agentId, parsed.value) : null;
    if (unheld) {
      error(unheld);
      continue;
    }
    if (tool.name === submitReviewTool.name && t.toolUseId !== firstReview) {
      error(`not recorded: one review per turn, and call ${firstReview} of this turn recorded it (its verdict stands)`);
      continue;
    }
    const call: ToolCall = { id: t.toolUseId, name: t.name, input: t.input };
    const plan = [o.plan(call), tool.describe?.(parsed.value)].filter(Boolean).join('\n\n');
    const ask = (kind: 'approval' | 'clarification', onTimeout: 'reject' | 'approve'): void =>
      void out.asks.push(askPerson({ tool, call, parsed: parsed.value, requestId: requestIdFor(kind, o.agentId, t.toolUseId), agentId: o.agentId, deadline, plan, onTimeout }));
    if (tool.runsIn === 'person') {
      ask('clarification', 'reject');
      continue;
    }
    const lead = o.state.lead?.agentId === o.agentId;
    if (tool.runsIn === 'delegation') {
      if (!lead) {
        error(`tool '${t.name}' delegates to another agent; only the lead delegates`);
        continue;
      }
      // (The Task tool's own check refused an agent the lead cannot delegate to.)
      if (tool.name === submitPlanTool.name && o.state.plan) {
        error(`this task already has a plan (${o.state.plan.status}); its result is your plan's outcome`);
        continue;
      }
      if (tool.name === submitPlanTool.name && t.toolUseId !== firstPlan) {
        error(`not recorded: one plan per turn, and call ${firstPlan} of this turn submitted it; its result is your plan's outcome`);
        continue;
      }
      if (asking) {
        error(`not run: you asked the person in this turn (${asking}); make this call again once you have their answer`);
        continue;
      }
    } else if (tool.runsIn !== o.runsIn) {
      error(`tool '${t.name}' runs in ${tool.runsIn === 'runner' ? 'a sandbox' : `the ${tool.runsIn}`} and is not available to ${lead ? 'the lead' : 'this agent'}`);
      continue;
    }
    const policy = approvalFor(o.team.approvals, o.state, o.def.id, tool);
    if (policy.required && !t.approvedInput) {
      ask('approval', policy.onTimeout);
      continue;
    }
    if (tool.name === submitPlanTool.name) {
      const input = parsed.value as Parameters<typeof planSubtasksOf>[0] & { summary: string };
      const reviewAgent = o.def.reviewAgent && o.team.agents[o.def.reviewAgent] ? o.def.reviewAgent : null;
      out.dispatches.push({ type: 'RecordPlan', agentId: o.agentId, toolUseId: t.toolUseId, summary: input.summary, subtasks: planSubtasksOf(input), reviewAgent, maxReviewRounds: o.def.reviewRounds ?? 1 });
      continue;
    }
    if (tool.runsIn === 'delegation') {
      const { agent, prompt } = parsed.value as { agent: string; prompt: string };
      const n = (dispatched.get(agent) ?? 0) + 1;
      dispatched.set(agent, n);
      out.dispatches.push({ type: 'DispatchSubagent', agentId: `${agent}-${n}`, agentType: agent, toolUseId: t.toolUseId, prompt });
      continue;
    }
    // A path outside the agent's file scope (or its subtask's locks) is refused, not run: at the
    // point it would run (after any approval), as a decision of the code that verify can check.
    const input = t.approvedInput ?? t.input;
    const violation = fileAccessViolation(writePolicyOf(o.def, o.state, o.agentId), t.name, input);
    if (violation) {
      error(violation);
      continue;
    }
    const edited = editedByPerson(t);
    out.runs.push({ call: { ...call, input }, input: parsed.value, ...(edited ? { edited } : {}) });
  }
  return out;
}

/**
 * A call a person edited before approving it ran with their input, not the model's: its result
 * says so first, so the model reads it against what ran (an error about a path it never named).
 */
function editedNoted(run: Triage['runs'][number], result: ToolResult): ToolResult {
  return run.edited ? withEditNote(result, run.input) : result;
}

function withEditNote(result: ToolResult, ranWith: unknown): ToolResult {
  return { ...result, content: `[a person edited this call before approving it; it ran with: ${cutText(JSON.stringify(ranWith), 2000)}]\n${result.content}` };
}

/** Whether a person approved the call with an input other than the model's. */
const editedByPerson = (t: Pick<OpenToolUse, 'input' | 'approvedInput'>): boolean =>
  t.approvedInput !== null && t.approvedInput !== undefined && canonicalJson(t.approvedInput) !== canonicalJson(t.input);

/** What the loop needs from the place it runs in. */
export interface LoopHost {
  readonly agentId: string;
  readonly team: TeamDefinition;
  readonly def: AgentDefinition;
  readonly runsIn: 'orchestrator' | 'runner';
  readonly model: ModelClient;
  /** The agent's system prompt and opening user message. */
  readonly system: string;
  readonly prompt: string;
  /** The runner attempt writing (subagents): a newer attempt fences this one off. */
  readonly attempt?: number;
  /** Who records (a runner id), kept in the turn's metadata. */
  readonly actor?: string;
  readonly signal?: AbortSignal;
  now(): Date;
  /** The state with everything recorded or pending applied. */
  state(): TaskState;
  /** Every event of the task so far, recorded or pending, in order (the conversation is built from them). */
  events(): readonly RecordedEvent[];
  /** The events recorded but not yet committed. */
  pending(): readonly RecordedEvent[];
  /** Decide commands now; what they record is pending until `commit`. */
  record(commands: readonly Command[], metadata?: EventMetadata): void;
  /** Make what is pending durable. False: the agent may not go on (superseded or cancelled). */
  commit(): Promise<boolean>;
  /** Run one call here (it was triaged as runnable); `input` is the call's input as the tool's schema parsed it. */
  execute(call: ToolCall, input: Record<string, unknown>): Promise<ToolResult>;
  /** At the start and before each model call: false to stop (the task was cancelled, the attempt superseded). */
  proceed?(): Promise<boolean>;
  /**
   * The task as the last `proceed` read it, other agents' spending included (default: `state()`);
   * the budget is checked against it before each model call.
   */
  latest?(): TaskState;
  /** The agent gave its final answer, or reached its turn limit: what ends it (null: nothing yet, e.g. the lead waits for subagents). */
  finish(o: { capped: boolean; finalText: string; failure: LoopFailure | null }): Promise<readonly Command[] | null>;
  /** What a person is shown when a call of this agent needs approval. */
  plan(call: ToolCall): string;
  /**
   * The agent gave its final answer: what to remind it of, if it ended without what its role
   * needs (a reviewer without a verdict) — sent as the next user message (AgentReminded), once,
   * within its turn limit; null or absent: it ends as it is.
   */
  remind?(): string | null;
}

export type LoopExit = 'finished' | 'waiting' | 'stopped';

/** Why an agent's loop ended failed, as the task records it (SubagentFailed, or TaskFailed for the lead). */
export interface LoopFailure {
  code: 'model_refused' | 'model_error' | 'model_unavailable';
  message: string;
}

/** How long an outage has lasted, in whole minutes (seconds under two minutes). */
function outageLength(outage: ModelOutage | undefined, now: Date): string {
  const ms = outage ? now.getTime() - Date.parse(outage.since) : 0;
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

const whoOf = (h: Pick<LoopHost, 'runsIn' | 'agentId'>): string => (h.runsIn === 'orchestrator' ? 'the lead' : `agent ${h.agentId}`);

/** Why an agent whose model refused (stop reason `refusal`) ends failed: its words, or that it gave none. */
const refusalMessage = (who: string, text: string): string => {
  const said = oneLine(text, 500);
  return `${who}'s model refused to go on${said ? `: ${said}` : ' (it gave no reason)'}`;
};

/** Move the agent as far as it can go now. Returns why it stopped: finished, waiting (on a person or a subagent), or stopped by the host. */
export async function runAgentLoop(h: LoopHost): Promise<LoopExit> {
  // The host may stop the loop before it starts and before each model call (a step is a model
  // call and the tools it asks for, so a turn that was paid for is recorded with its results).
  if (h.proceed && !(await h.proceed())) return 'stopped';
  // A step: a model turn and the tool calls it asked for (timed from the model call to its results).
  let stepStarted: number | null = null;
  const stepDone = (): void => {
    if (stepStarted === null) return;
    metrics.stepSeconds.observe({ runs_in: h.runsIn, team: h.team.id }, (performance.now() - stepStarted) / 1000);
    stepStarted = null;
  };
  try {
    return await loopUntilSettled(h, () => { stepDone(); stepStarted = performance.now(); }, stepDone);
  } finally {
    stepDone();
  }
}

async function loopUntilSettled(h: LoopHost, stepStarts: () => void, stepDone: () => void): Promise<LoopExit> {
  for (let guard = 0; guard < 10_000; guard++) {
    h.signal?.throwIfAborted();
    const s = h.state();
    const loop = loopOf(s, h.agentId);
    if (isFinal(s) || !loop) return (await h.commit()) ? 'finished' : 'stopped';

    if (loop.phase === 'tools') {
      const t = triageToolUses({ state: s, agentId: h.agentId, team: h.team, def: h.def, runsIn: h.runsIn, now: h.now(), plan: (c) => h.plan(c) });
      if (mustCommitBeforeTools(h, t.runs) && !(await h.commit())) return 'stopped';
      const results = t.results.slice();
      for (const r of t.runs) results.push(editedNoted(r, await executeTraced(h, r.call, r.input)));
      stepDone();
      if (t.asks.length === 0 && t.dispatches.length === 0 && !t.waiting) {
        h.record([resultsCommand(h, loop, [...resolved(loop.openToolUses), ...results])]);
        continue; // a model turn is due
      }
      // Waiting on a person or a subagent: record what is known already, so it never runs twice.
      h.record([...(results.length > 0 ? [resultsCommand(h, loop, results)] : []), ...t.asks, ...t.dispatches]);
      return (await h.commit()) ? 'waiting' : 'stopped';
    }

    if (loop.phase === 'done' && !loop.refused && (loop.reminders ?? 0) < MAX_REMINDERS && loop.turns < h.def.maxTurns) {
      const text = h.remind?.() ?? null;
      if (text) {
        h.record([{ type: 'RemindAgent', agentId: h.agentId, text, attempt: h.attempt }], h.actor ? { actor: h.actor } : {});
        continue; // a model turn is due
      }
    }
    const capped = loop.phase === 'model' && loop.turns >= h.def.maxTurns;
    if (loop.phase === 'done' || capped) {
      const finalText = loop.finalText ?? lastText(h.events(), h.agentId);
      const failure: LoopFailure | null = !capped && loop.refused ? { code: 'model_refused', message: refusalMessage(whoOf(h), finalText) } : null;
      const end = await h.finish({ capped, finalText, failure });
      if (end) h.record(end);
      const ok = await h.commit();
      return !ok ? 'stopped' : end ? 'finished' : 'waiting';
    }

    // A recorded turn is paid for: make it durable before asking the model again. With a real
    // model (seconds per call) everything pending is committed first, so the task shows how far
    // it got; the instant offline model lets the step before ride along with the next turn.
    if (mustCommitBeforeModel(h) && !(await h.commit())) return 'stopped';
    if (guard > 0 && h.proceed && !(await h.proceed())) return 'stopped';
    // The budget reached (or a person still deciding on it): no model call. The request opens if
    // nobody opened it yet; a subagent pauses, holding nothing; the lead waits for the decision.
    const hold = budgetHold(h.latest?.() ?? s, h.agentId, { attempt: h.attempt, now: h.now() });
    if (hold) {
      if (hold.length > 0) h.record(hold);
      return (await h.commit()) ? 'waiting' : 'stopped';
    }
    const startedAt = h.now();
    const startedHr = performance.now();
    stepStarts();
    let res: ModelResponse;
    try {
      res = await callModel(h, s.id, loop.turns + 1);
    } catch (err) {
      if (err instanceof ModelUnavailableError) {
        // Recorded, so that how long the model has been away is known wherever the call is asked
        // again (another attempt, another replica); past the client's outage limit the agent ends.
        h.record([{ type: 'RecordModelUnavailable', agentId: h.agentId, error: err.message, attempt: h.attempt }], h.actor ? { actor: h.actor } : {});
        const outage = (loopOf(h.state(), h.agentId) ?? loop).modelOutage;
        if (!modelOutageOver({ modelOutage: outage }, h.now(), h.model.outageLimitMs)) {
          if (!(await h.commit())) return 'stopped';
          throw err; // asked again later by the host's queue
        }
        const end = await h.finish({ capped: false, finalText: '', failure: { code: 'model_unavailable', message: `${whoOf(h)}'s model could not answer for ${outageLength(outage, h.now())} (${outage?.failures ?? 1} failed calls since ${outage?.since ?? 'now'}; ANTHROPIC_OUTAGE_LIMIT_MS is ${h.model.outageLimitMs} ms): given up. Last error: ${err.message}` } });
        if (end) h.record(end);
        return (await h.commit()) ? 'finished' : 'stopped';
      }
      if (!(err instanceof ModelRejectedError)) throw err; // retried by the host's queue
      // Asking again cannot mend it: the agent ends failed now, saying why.
      const end = await h.finish({ capped: false, finalText: '', failure: { code: 'model_error', message: `${whoOf(h)}'s model call failed for good: ${err.message}` } });
      if (end) h.record(end);
      return (await h.commit()) ? 'finished' : 'stopped';
    }
    // A model reply may hold text Postgres cannot store (NUL, unpaired surrogates): replaced, and the turn's metadata says how many.
    const content = cleanText(res.content);
    h.record(
      [{ type: 'RecordModelTurn', agentId: h.agentId, turn: loop.turns + 1, model: res.model, content: content.value, stopReason: res.stopReason, usage: res.usage, offline: res.offline, durationMs: h.now().getTime() - startedAt.getTime(), attempt: h.attempt }],
      // startedAtMs: sub-millisecond epoch time (performance clock), for latency figures across processes.
      { startedAt: startedAt.toISOString(), startedAtMs: performance.timeOrigin + startedHr, ...(h.actor ? { actor: h.actor } : {}), ...(content.replaced > 0 ? { textReplaced: content.replaced } : {}) },
    );
  }
  throw new Error(`agent ${h.agentId}: the loop did not settle`);
}

/**
 * One model call, as a GenAI `chat` span (model, tokens, finish reason) with its duration, turns,
 * tokens and cost counted by team and model.
 */
function callModel(h: LoopHost, taskId: string, turn: number): Promise<ModelResponse> {
  const started = performance.now();
  // The model that answers (the offline one for Claude without a key): what the span and every series name the call by.
  const served = h.model.servedModel?.(h.def.model) ?? h.def.model;
  return inSpan(
    `chat ${served}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': served.startsWith('offline') ? 'baton.offline' : 'anthropic',
        'gen_ai.request.model': h.def.model,
        'gen_ai.request.max_tokens': h.def.maxTokens,
        'gen_ai.agent.id': h.agentId,
        'gen_ai.agent.name': h.def.id,
        'baton.task_id': taskId,
        'baton.team': h.team.id,
        'baton.turn': turn,
      },
    },
    async (span: Span) => {
      let outcome = 'error';
      try {
        const res = await h.model.complete({
          agentType: h.def.id,
          model: h.def.model,
          system: h.system,
          messages: buildConversation(h.prompt, h.agentId, h.events()),
          tools: h.def.tools.map((n) => allTools[n]).filter((t) => t !== undefined).map(toolSpec),
          maxTokens: h.def.maxTokens,
          ...(h.signal ? { signal: h.signal } : {}),
        });
        outcome = 'ok';
        const u = res.usage;
        span.setAttributes({
          'gen_ai.response.model': res.model,
          'gen_ai.response.finish_reasons': [res.stopReason],
          'gen_ai.usage.input_tokens': u.inputTokens,
          'gen_ai.usage.output_tokens': u.outputTokens,
          'gen_ai.usage.cache_read.input_tokens': u.cacheReadTokens,
          'gen_ai.usage.cache_creation.input_tokens': u.cacheWriteTokens,
          'baton.cost_usd': u.costUsd,
        });
        const labels = { team: h.team.id, model: served };
        metrics.turns.inc(labels);
        metrics.tokens.inc({ ...labels, kind: 'input' }, u.inputTokens);
        metrics.tokens.inc({ ...labels, kind: 'output' }, u.outputTokens);
        if (u.cacheReadTokens) metrics.tokens.inc({ ...labels, kind: 'cache_read' }, u.cacheReadTokens);
        if (u.cacheWriteTokens) metrics.tokens.inc({ ...labels, kind: 'cache_write' }, u.cacheWriteTokens);
        metrics.costUsd.inc(labels, u.costUsd); // at 0 too: a team's spending series exists from its first turn (a dashboard shows $0, not "No data")
        return res;
      } finally {
        metrics.modelSeconds.observe({ model: served, outcome }, (performance.now() - started) / 1000);
      }
    },
  );
}

/** One tool call run here, as a GenAI `execute_tool` span; counted by tool and outcome. */
function executeTraced(h: LoopHost, call: ToolCall, input: Record<string, unknown>): Promise<ToolResult> {
  return inSpan(
    `execute_tool ${call.name}`,
    { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': call.name, 'gen_ai.tool.call.id': call.id, 'gen_ai.tool.type': 'function', 'gen_ai.agent.id': h.agentId } },
    async (span: Span) => {
      let outcome = 'error';
      try {
        const r = await h.execute(call, input);
        outcome = r.isError ? 'error' : 'ok';
        if (r.isError) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool reported an error' });
        return r;
      } finally {
        metrics.toolCalls.inc({ tool: call.name, outcome });
      }
    },
  );
}

/** Tools that take seconds to minutes (a command in the sandbox): what the agent is doing is worth showing while they run. */
const SLOW_TOOLS: ReadonlySet<string> = new Set(['run_command', 'run_tests']);

/**
 * Before the turn's tools run, its model turn is made durable when they are slow (commands) or
 * the model is a real one: the task then shows what the agent runs ("running tests", not
 * "thinking" for a whole test run), and a runner that dies mid-tool resumes at the tools rather
 * than paying for the turn again (and getting another answer). A real model's turn is made
 * durable even when it ran no tool here (it only delegated or asked): what it cost is counted,
 * and whatever recording its outcome meets cannot send the paid turn to the model again. The
 * instant offline model's quick tools keep riding along with their results: one commit per step.
 */
function mustCommitBeforeTools(h: LoopHost, runs: readonly { call: ToolCall }[]): boolean {
  if (!h.pending().some((e) => e.type === 'ModelTurnRecorded')) return false;
  return !h.def.model.startsWith('offline') || runs.some((r) => SLOW_TOOLS.has(r.call.name));
}

function mustCommitBeforeModel(h: LoopHost): boolean {
  const pending = h.pending();
  return pending.some((e) => e.type === 'ModelTurnRecorded') || (pending.length > 0 && !h.def.model.startsWith('offline'));
}

/**
 * Results of the open tool uses that are resolved in the state (by a decision or a subagent). A
 * delegation or a plan a person edited before approving it ran as they wrote it: its result
 * (made when the work ended) says so first, as a call run on the spot does.
 */
function resolved(open: readonly OpenToolUse[]): ToolResult[] {
  return open.flatMap((t) => (t.state === 'resolved' && t.result ? [editedByPerson(t) ? withEditNote(t.result, t.approvedInput) : t.result] : []));
}

/** One RecordToolResults, its results in the order of the turn's tool uses (so the conversation pairs them exactly). */
function resultsCommand(h: LoopHost, loop: AgentLoopState, results: ToolResult[]): Command {
  const order = new Map(loop.openToolUses.map((t, i) => [t.toolUseId, i]));
  const sorted = results.slice().sort((a, b) => (order.get(a.toolUseId) ?? 0) - (order.get(b.toolUseId) ?? 0));
  return { type: 'RecordToolResults', agentId: h.agentId, results: sorted.map(storable), attempt: h.attempt };
}

/**
 * A tool result as the log can hold it: a command's output or a file's text may carry NUL or
 * unpaired surrogates (Postgres refuses them); they are replaced (␀, �) and the result says so,
 * for the model to know the text it sees is not byte for byte what the tool produced.
 */
export function storable(r: ToolResult): ToolResult {
  const { value, replaced } = cleanText(r);
  if (replaced === 0) return r;
  return { ...value, content: `${value.content}\n[baton: ${replaced} character${replaced === 1 ? '' : 's'} that cannot be stored (NUL as ${NUL_REPLACEMENT}, unpaired surrogates as \ufffd) replaced in this result]` };
}

/** The agent's text in its latest turn (what a lead's plan says, what a subagent's summary is). */
export function lastText(events: readonly RecordedEvent[], agentId: string): string {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as RecordedEvent;
    if (e.type === 'ModelTurnRecorded' && e.data.agentId === agentId) return textOf(e.data.content);
  }
  return '';
}
