import {
  activeAgents,
  decide,
  evolve,
  isFinal,
  LEAD_AGENT_ID,
  textOf,
  type Command,
  type DecidedEvent,
  type RecordedEvent,
  type TaskState,
  type ToolResult,
} from '@baton/domain';
import {
  allTools,
  approvalFor,
  askPerson,
  buildConversation,
  builtinTeams,
  type TeamCatalog,
  configVersion,
  delegationTargets,
  leadSystemPrompt,
  parseToolInput,
  toolSpec,
  type ModelClient,
  type TeamDefinition,
} from '@baton/agents';
import { appendToTask, isConcurrencyError, loadTask, type EventStore, type TaskLoader } from '@baton/event-store';
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
  /** Called with each committed batch (the service publishes its wake-ups at once: runner jobs). */
  committed?: (events: RecordedEvent[]) => void;
}

/**
 * Advance one task as far as it can go right now: start the lead, run its model turns,
 * execute its local tools, open approvals, dispatch subagents, complete the task. Everything
 * is decided from the state folded from the log, so running it twice, or on two replicas at
 * once, is harmless: the second append conflicts and the loser re-reads.
 * Each step is one durable append: a model turn together with what it led to (tool results,
 * dispatches, approval requests, completion).
 */
export async function advanceTask(deps: LeadDeps, taskId: string): Promise<{ appended: number; state: TaskState }> {
  let appended = 0;
  for (let attempt = 1; ; attempt++) {
    const loaded = await (deps.load ?? ((id: string) => loadTask(deps.store, id)))(taskId);
    if (loaded.state.status === 'none' || isFinal(loaded.state)) return { appended, state: loaded.state };
    try {
      const res = await runLead(deps, loaded.state, loaded.events);
      appended += res.appended;
      return { appended, state: res.state };
    } catch (err) {
      if (!isConcurrencyError(err) || attempt >= 10) throw err;
      deps.log.debug({ taskId, attempt }, 'lead: version conflict, re-reading');
    }
  }
}

async function runLead(deps: LeadDeps, initial: TaskState, history: RecordedEvent[]): Promise<{ appended: number; state: TaskState }> {
  const teams = deps.teams ?? builtinTeams;
  const taskId = initial.id;
  let committed = initial;
  const events = history.slice();
  let pending: DecidedEvent[] = [];
  let s = initial;
  let appended = 0;

  const apply = (cmd: Command, metadata?: DecidedEvent['metadata']): void => {
    for (const e of decide(cmd, s)) {
      const ev = (metadata ? { ...e, metadata } : e) as DecidedEvent;
      pending.push(ev);
      s = evolve(s, preview(ev, s, taskId));
    }
  };
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const res = await appendToTask(deps.store, committed, taskId, pending, { now: deps.now });
    appended += res.events.length;
    events.push(...res.events);
    deps.committed?.(res.events);
    committed = res.state;
    s = committed;
    pending = [];
  };

  const team = deps.catalog ? await deps.catalog.resolve(s.team, s.lead?.configVersion) : teams[s.team];
  if (!team) {
    apply({ type: 'FailTask', code: 'unknown_team', message: `team '${s.team}' is not configured` });
    await flush();
    return { appended, state: committed };
  }

  for (let guard = 0; guard < 10_000; guard++) {
    if (isFinal(s)) break;
    if (!s.lead) {
      apply({ type: 'StartTask', leadAgentId: LEAD_AGENT_ID, leadAgentType: team.lead.id, configVersion: configVersion(team) });
      continue;
    }
    const lead = s.lead;
    if (lead.phase === 'done') {
      if (activeAgents(s).length === 0) {
        const report = s.artifacts.find((a) => /(^|\/)report\.md$/.test(a.path));
        apply({ type: 'CompleteTask', summary: lead.finalText ?? '', reportPath: report?.path ?? null });
      }
      break;
    }
    if (lead.phase === 'tools') {
      const planText = lastLeadText([...events, ...pending.map((e) => preview(e, s, taskId))], lead.agentId);
      const results = handleToolUses(s, team, apply, deps.now(), planText);
      const resolved = lead.openToolUses.filter((t) => t.state === 'resolved' && t.result).map((t) => t.result as ToolResult);
      const stillOpen = s.lead?.openToolUses.filter((t) => t.state !== 'resolved' && !results.some((r) => r.toolUseId === t.toolUseId)) ?? [];
      const ready = [...resolved, ...results];
      if (stillOpen.length === 0 && ready.length > 0) {
        // Keep tool_use order so the conversation pairs them exactly.
        const order = new Map(lead.openToolUses.map((t, i) => [t.toolUseId, i]));
        ready.sort((a, b) => (order.get(a.toolUseId) ?? 0) - (order.get(b.toolUseId) ?? 0));
        apply({ type: 'RecordToolResults', agentId: lead.agentId, results: ready });
        continue; // the lead is now due a model turn
      }
      // Waiting on a person or a subagent: record what is already known, so it never runs twice.
      if (results.length > 0) apply({ type: 'RecordToolResults', agentId: lead.agentId, results });
      break;
    }
    // phase === 'model'
    if (lead.turns >= team.lead.maxTurns) {
      apply({ type: 'FailTask', code: 'max_turns', message: `the lead reached its limit of ${team.lead.maxTurns} turns` });
      break;
    }
    // A recorded turn is paid for: make it durable before asking the model again. Everything
    // else (start, tool results) rides along with the next turn, so each step is one commit.
    // A real model call takes seconds: the task shows `running` (its start committed) meanwhile.
    // The instant offline model keeps the start in the same commit as the first turn.
    if (pending.some((e) => e.type === 'ModelTurnRecorded' || (e.type === 'TaskStarted' && !team.lead.model.startsWith('offline')))) await flush();
    const startedAt = deps.now();
    const startedHr = performance.now();
    const messages = buildConversation(s.prompt, lead.agentId, [...events, ...pending.map((e) => preview(e, s, taskId))]);
    const res = await deps.model.complete({
      agentType: team.lead.id,
      model: team.lead.model,
      system: leadSystemPrompt(team),
      messages,
      tools: team.lead.tools.map((n) => allTools[n]).filter((t) => t !== undefined).map(toolSpec),
      maxTokens: team.lead.maxTokens,
    });
    apply(
      {
        type: 'RecordModelTurn',
        agentId: lead.agentId,
        turn: lead.turns + 1,
        model: res.model,
        content: res.content,
        stopReason: res.stopReason,
        usage: res.usage,
        offline: res.offline,
        durationMs: deps.now().getTime() - startedAt.getTime(),
      },
      // startedAtMs: sub-millisecond epoch time (performance clock), for latency measurements across processes.
      { startedAt: startedAt.toISOString(), startedAtMs: performance.timeOrigin + startedHr },
    );
  }
  await flush();
  return { appended, state: committed };
}

/**
 * Decide what happens to each of the lead's pending tool uses: ask a person first (approval
 * policy), ask the person a question (ask_user), run it here (local tools) or dispatch a
 * subagent. Returns the results known right away.
 */
function handleToolUses(s: TaskState, team: TeamDefinition, apply: (c: Command) => void, now: Date, planText: string): ToolResult[] {
  const lead = s.lead;
  if (!lead) return [];
  const results: ToolResult[] = [];
  const dispatchedTypes = new Map<string, number>();
  for (const a of Object.values(s.agents)) dispatchedTypes.set(a.type, (dispatchedTypes.get(a.type) ?? 0) + 1);
  const deadline = new Date(now.getTime() + s.approvalTimeoutSeconds * 1000).toISOString();

  for (const t of lead.openToolUses) {
    if (t.state !== 'pending') continue;
    const error = (content: string): void => void results.push({ toolUseId: t.toolUseId, toolName: t.name, content, isError: true });
    const def = allTools[t.name];
    if (!def || !team.lead.tools.includes(t.name)) {
      error(`tool '${t.name}' is not available to this agent; available: ${team.lead.tools.join(', ')}`);
      continue;
    }
    const parsed = parseToolInput(def, t.approvedInput ?? t.input);
    if (!parsed.ok) {
      error(parsed.error);
      continue;
    }
    const call = { id: t.toolUseId, name: t.name, input: t.input };
    const ask = (requestId: string, onTimeout: 'reject' | 'approve') => askPerson({ tool: def, call, parsed: parsed.value, requestId, agentId: lead.agentId, deadline, plan: planText, onTimeout });
    if (def.runsIn === 'person') {
      apply(ask(`clr-${t.toolUseId}`, 'reject'));
      continue;
    }
    if (def.runsIn === 'delegation') {
      const input = parsed.value as { agent: string; prompt: string };
      if (!delegationTargets(team.lead).includes(input.agent) || !team.agents[input.agent]) {
        error(`unknown agent '${input.agent}'; this team delegates to: ${delegationTargets(team.lead).join(', ')}`);
        continue;
      }
    } else if (def.runsIn !== 'orchestrator') {
      error(`tool '${t.name}' runs in a sandbox and is not available to the lead`);
      continue;
    }
    const policy = approvalFor(team.approvals, s, team.lead.id, def);
    if (policy.required && !t.approvedInput) {
      apply(ask(`apr-${t.toolUseId}`, policy.onTimeout));
      continue;
    }
    if (def.runsIn === 'delegation') {
      const input = parsed.value as { agent: string; prompt: string };
      const n = (dispatchedTypes.get(input.agent) ?? 0) + 1;
      dispatchedTypes.set(input.agent, n);
      apply({ type: 'DispatchSubagent', agentId: `${input.agent}-${n}`, agentType: input.agent, toolUseId: t.toolUseId, prompt: input.prompt });
      continue;
    }
    results.push({ toolUseId: t.toolUseId, toolName: t.name, content: runLocalTool(t.name, parsed.value), isError: false });
  }
  return results;
}

function runLocalTool(name: string, input: Record<string, unknown>): string {
  switch (name) {
    case 'bench_step':
    case 'bench_gate':
      return `step ${String(input.step)} recorded`;
    default:
      throw new Error(`no local implementation for tool '${name}'`);
  }
}

/** The plan shown to a person: the lead's text in its latest turn (the one that made the tool call). */
function lastLeadText(events: readonly RecordedEvent[], leadId: string): string {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as RecordedEvent;
    if (e.type === 'ModelTurnRecorded' && e.data.agentId === leadId) return textOf(e.data.content);
  }
  return '';
}

/** A decided event as it will look once recorded (for folding ahead of the append). */
function preview(e: DecidedEvent, s: TaskState, taskId: string): RecordedEvent {
  return {
    id: '00000000-0000-0000-0000-000000000000',
    type: e.type,
    taskId,
    streamId: `task-${taskId}`,
    version: s.version + 1,
    position: s.lastPosition,
    recordedAt: new Date(s.updatedAt || Date.now()),
    data: e.data,
    metadata: e.metadata ?? {},
    schemaVersion: 1,
  } as RecordedEvent;
}
