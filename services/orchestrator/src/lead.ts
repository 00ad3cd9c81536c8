import { activeAgents, isFinal, LEAD_AGENT_ID, oneLine, own, schedulePlan, type Command, type PlanState, type RecordedEvent, type TaskState, type ToolResult } from '@baton/domain';
import {
  builtinTeams,
  configVersion,
  lastText,
  leadOpening,
  leadSystemPrompt,
  PLAN_REMINDER,
  runAgentLoop,
  submitPlanTool,
  type LoopHost,
  type ModelClient,
  type TeamCatalog,
  type TeamDefinition,
  type ToolCall,
} from '@baton/agents';
import { loadTask, retryOnConflict, TaskWriter, type EventStore, type LoadedTask, type TaskCache, type TaskLoader } from '@baton/event-store';
import type { Logger } from '@baton/runtime';

export { LEAD_AGENT_ID };

export interface LeadDeps {
  store: EventStore;
  model: ModelClient;
  teams?: Readonly<Record<string, TeamDefinition>>;
  /** Resolves a run's pinned config version (default: the current `teams`, versions ignored). */
  catalog?: TeamCatalog;
  now: () => Date;
  log: Logger;
  /** How tasks are loaded (default: a full re-read); services pass a TaskCache's incremental load. */
  load?: TaskLoader;
  /** What this process knows of its tasks (the service's TaskCache): a wake-up applied to it instead of a read, and what the lead wrote noted in it. */
  known?: Pick<TaskCache, 'advance' | 'note'>;
  /** Called with each committed batch (the service publishes its wake-ups at once: runner jobs). */
  committed?: (events: readonly RecordedEvent[]) => void;
  /** The files of an input workspace (path and size), shown to the lead; absent: the lead is not shown them. */
  workspaceFiles?: (digest: string) => Promise<{ path: string; bytes: number }[]>;
}


/**
 * Advance one task as far as it can go right now: start the lead, then run its loop (the one
 * agent loop: model turns, its local tools, approvals, delegations, completion). Everything is
 * decided from the state folded from the log, so running it twice, or on two replicas at once,
 * is harmless: the second append conflicts and the loser re-reads. Each step is one durable
 * append: a model turn together with what it led to.
 *
 * `woken`, the event that woke the lead, is applied to what this process knows of the task
 * when that is exactly one event behind (`TaskCache.advance`): the first attempt then reads
 * nothing. A retry after a conflict reads. `signal` aborts the run where it is — its model call
 * too (the service aborts it when the task ends meanwhile: a cancel).
 */
export async function advanceTask(deps: LeadDeps, taskId: string, woken: RecordedEvent | null = null, signal?: AbortSignal): Promise<{ appended: number; state: TaskState }> {
  let appended = 0;
  const load = deps.load ?? ((id: string) => loadTask(deps.store, id));
  let known = woken ? (deps.known?.advance(taskId, woken) ?? null) : null;
  const state = await retryOnConflict(
    async () => {
      const loaded = known ?? (await load(taskId));
      known = null;
      if (loaded.state.status === 'none' || isFinal(loaded.state)) return loaded.state;
      const ran = await runLead(deps, loaded.state, loaded.events, (n) => (appended += n), signal);
      deps.known?.note(taskId, ran);
      return ran.state;
    },
    { maxAttempts: 10, onConflict: (attempt) => deps.log.debug({ taskId, attempt }, 'lead: version conflict, re-reading') },
  );
  return { appended, state };
}

/** Run the lead from `initial`; the task as it then stands: the writer's state and the events committed (`TaskCache.note` keeps the pair only when the state is their fold). */
async function runLead(deps: LeadDeps, initial: TaskState, history: readonly RecordedEvent[], count: (n: number) => void, signal?: AbortSignal): Promise<LoadedTask> {
  const taskId = initial.id;
  const writer = new TaskWriter(deps.store, taskId, initial, { now: deps.now });
  const events = history.slice();
  const commit = async (): Promise<boolean> => {
    const recorded = await writer.flush();
    if (recorded.length === 0) return true;
    count(recorded.length);
    events.push(...recorded);
    deps.committed?.(recorded);
    return true;
  };

  // Pinned: the lead's version once started; before, the one the task was accepted with (its gateway recorded it).
  const team = deps.catalog ? await deps.catalog.resolve(initial.team, initial.lead?.configVersion ?? initial.acceptedConfigVersion ?? undefined) : own(deps.teams ?? builtinTeams, initial.team);
  if (!team) {
    writer.apply({ type: 'FailTask', code: 'unknown_team', message: `team '${initial.team}' is not configured` });
    await commit();
    return { state: writer.state, events };
  }
  if (!initial.lead) writer.apply({ type: 'StartTask', leadAgentId: LEAD_AGENT_ID, leadAgentType: team.lead.id, configVersion: configVersion(team) });
  // The plan's scheduler: whatever has become ready runs now (after every step of the lead too).
  const schedule = (): void => {
    const ready = schedulePlan(writer.state);
    if (ready.length > 0) writer.apply(ready);
  };
  schedule();

  const host: LoopHost = {
    agentId: writer.state.lead?.agentId ?? LEAD_AGENT_ID,
    team,
    def: team.lead,
    runsIn: 'orchestrator',
    ...(signal ? { signal } : {}),
    model: deps.model,
    system: leadSystemPrompt(team),
    prompt: await leadPrompt(deps, initial),
    now: deps.now,
    state: () => writer.state,
    events: () => events.concat(writer.pending),
    pending: () => writer.pending,
    record: (commands, metadata) => {
      writer.apply(commands, metadata ? { metadata } : {});
      schedule();
    },
    commit,
    execute: async (call, input) => runLocalTool(call, input),
    plan: () => lastText(events.concat(writer.pending), LEAD_AGENT_ID),
    // A lead that plans (submit_plan) and answered without ever calling it is asked once whether it meant to.
    remind: () => (team.lead.tools.includes(submitPlanTool.name) && !writer.state.plan && !calledEver(events.concat(writer.pending), LEAD_AGENT_ID, submitPlanTool.name) ? PLAN_REMINDER : null),
    finish: async ({ capped, failure }) => {
      const s = writer.state;
      if (failure) return [{ type: 'FailTask', code: failure.code, message: failure.message }];
      if (activeAgents(s).length > 0) return null; // the lead answered; its subagents are still at work
      if (s.plan?.status === 'failed') return [failPlan(s)];
      const report = s.artifacts.find((a) => /(^|\/)report\.md$/.test(a.path));
      if (capped) {
        // Its plan (submitted on its last turn) ran to the end: the task has its outcome, not nothing.
        if (s.plan?.status === 'completed') return [{ type: 'CompleteTask', summary: cappedPlanSummary(s.plan, team.lead.maxTurns), reportPath: report?.path ?? null, leadCapped: true }];
        return [{ type: 'FailTask', code: 'max_turns', message: `the lead reached its limit of ${turnsOf(team.lead.maxTurns)}` }];
      }
      return [{ type: 'CompleteTask', summary: s.lead?.finalText ?? '', reportPath: report?.path ?? null }];
    },
  };
  await runAgentLoop(host);
  return { state: writer.state, events };
}

/** The lead's opening message: the task, and the files of the codebase it starts from (if any). */
async function leadPrompt(deps: LeadDeps, s: TaskState): Promise<string> {
  return leadOpening(s.prompt, s.workspace && deps.workspaceFiles ? await deps.workspaceFiles(s.workspace.digest) : null);
}

/** Did the agent ever call this tool (in any turn, whatever came of it)? */
function calledEver(events: readonly RecordedEvent[], agentId: string, tool: string): boolean {
  return events.some((e) => e.type === 'ModelTurnRecorded' && e.data.agentId === agentId && e.data.content.some((b) => b.type === 'tool_use' && b.name === tool));
}

/** A plan that failed (a subtask failed, or the review could not be made) fails the task, naming what failed. */
function failPlan(s: TaskState): Command {
  const failed = (s.plan?.subtasks ?? []).filter((t) => t.status === 'failed' || t.status === 'skipped').map((t) => `${t.id} ${t.status}`);
  const why = failed.length > 0 ? failed.join(', ') : 'the review gave no verdict';
  return { type: 'FailTask', code: 'plan_failed', message: `the plan did not complete: ${why}` };
}

const turnsOf = (n: number): string => `${n} turn${n === 1 ? '' : 's'}`;

/** A completed plan's outcome in words, for a lead that reached its turn limit before it could write its final answer. */
export function cappedPlanSummary(plan: PlanState, maxTurns: number): string {
  const review = plan.reviews.at(-1);
  return [
    `The lead reached its limit of ${turnsOf(maxTurns)} before its final answer; its plan completed. Plan: ${oneLine(plan.summary, 1000)}`,
    ...plan.subtasks.map((t) => `- ${t.id} (${t.agent}): ${t.status}${t.summary ? ` — ${oneLine(t.summary, 300)}` : ''}`),
    review ? `Review (${review.agentId}): ${review.verdict}${review.issues.length > 0 ? `, ${review.issues.length} issue${review.issues.length === 1 ? '' : 's'}` : ''} — ${oneLine(review.summary, 500)}` : 'No review.',
  ].join('\n');
}

/** The lead's own tools (the benchmark's no-ops); everything else it does is delegation or asking. */
function runLocalTool(call: ToolCall, input: Record<string, unknown>): ToolResult {
  switch (call.name) {
    case 'bench_step':
    case 'bench_gate':
      return { toolUseId: call.id, toolName: call.name, content: `step ${String(input.step)} recorded`, isError: false };
    default:
      throw new Error(`no local implementation for tool '${call.name}'`);
  }
}
