import path from 'node:path';
import { agentStreamId, isFinal, isToolUse, textOf, type RecordedEvent, type ToolResult } from '@baton/domain';
import { buildConversation, builtinTeams, findAgent, allTools, toolSpec, type ModelClient, type TeamDefinition } from '@baton/agents';
import { appendToAgent, handleCommand, isConcurrencyError, loadTask, type EventStore, type TaskLoader } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import { runTool } from './tools.ts';
import { Workspace } from './workspace.ts';

export interface RunnerDeps {
  store: EventStore;
  model: ModelClient;
  teams?: Readonly<Record<string, TeamDefinition>>;
  workspaceRoot: string;
  runnerId: string;
  now: () => Date;
  log: Logger;
  /** How tasks are loaded (default: a full re-read); the service passes a TaskCache's load. */
  load?: TaskLoader;
}

export type JobOutcome = 'completed' | 'failed' | 'superseded' | 'nothing-to-do';

/**
 * Run (or resume) one subagent. Ownership is fenced in Postgres, not by NATS acks: the
 * runner records `SubagentStarted` with the next attempt number, writes each turn to the
 * agent's own stream at the version it read (a concurrent writer makes it conflict), and
 * completes only if its attempt is still the current one. A job redelivered after a crash
 * resumes from the last recorded turn; a tool whose result was recorded never runs again.
 */
export async function runSubagentJob(d: RunnerDeps, taskId: string, agentId: string, heartbeat: () => void, signal?: AbortSignal): Promise<JobOutcome> {
  const teams = d.teams ?? builtinTeams;
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  const initial = await load(taskId);
  const agent0 = initial.state.agents[agentId];
  if (!agent0 || isFinal(initial.state) || (agent0.status !== 'dispatched' && agent0.status !== 'running')) return 'nothing-to-do';
  const team = teams[initial.state.team];
  const def = team ? findAgent(team, agent0.type) : undefined;
  if (!def) {
    await handleCommand(d.store, taskId, { type: 'FailSubagent', agentId, code: 'unknown_agent', message: `agent type '${agent0.type}' is not configured in team '${initial.state.team}'` }, { load });
    return 'failed';
  }
  const attempt = agent0.attempt + 1;
  const claimed = await claimAttempt(d, taskId, agentId, attempt);
  if (!claimed) return 'superseded';
  let { state, events } = claimed;
  const ws = new Workspace(path.join(d.workspaceRoot, taskId, agentId));
  await ws.ensure();
  const streamId = agentStreamId(taskId, agentId);
  let agentEvents: RecordedEvent[] = events.filter((e) => e.streamId === streamId);
  const tools = def.tools.map((n) => allTools[n]).filter((t) => t !== undefined).map(toolSpec);

  for (;;) {
    signal?.throwIfAborted();
    heartbeat();
    const agent = state.agents[agentId];
    if (!agent || agent.attempt !== attempt || agent.status !== 'running') return 'superseded';
    const last = agentEvents[agentEvents.length - 1];
    const finished = last?.type === 'ModelTurnRecorded' && last.data.stopReason !== 'tool_use';
    if (finished || agent.turns >= def.maxTurns) {
      const capped = !finished;
      const files = collectFiles(agentEvents);
      const summary = capped
        ? `stopped after reaching the iteration cap of ${def.maxTurns} turns. ${last?.type === 'ModelTurnRecorded' ? textOf(last.data.content) : ''}`.trim()
        : last?.type === 'ModelTurnRecorded' ? textOf(last.data.content) : '';
      try {
        await handleCommand(d.store, taskId, (s) => {
          const a = s.agents[agentId];
          return a && a.status === 'running' && a.attempt === attempt
            ? { type: 'CompleteSubagent', agentId, attempt, summary, filesCreated: files.created, filesModified: files.modified, success: !capped, iterationCapReached: capped }
            : null;
        }, { load });
      } catch (err) {
        if ((err as { code?: string }).code === 'stale_attempt') return 'superseded';
        throw err;
      }
      return 'completed';
    }

    const startedAt = d.now();
    const res = await d.model.complete({
      agentType: def.id,
      model: def.model,
      system: def.prompt,
      messages: buildConversation(agent.prompt, agentId, agentEvents),
      tools,
      maxTokens: def.maxTokens,
      ...(signal ? { signal } : {}),
    });
    const results: ToolResult[] = [];
    if (res.stopReason === 'tool_use') {
      for (const call of res.content.filter(isToolUse)) {
        heartbeat();
        results.push(await runTool(call, def.tools, ws));
      }
    }
    const turn = {
      type: 'RecordModelTurn' as const,
      agentId,
      turn: agent.turns + 1,
      model: res.model,
      content: res.content,
      stopReason: res.stopReason,
      usage: res.usage,
      offline: res.offline,
      durationMs: d.now().getTime() - startedAt.getTime(),
    };
    const decided = [
      { type: 'ModelTurnRecorded' as const, data: stripType(turn), metadata: { startedAt: startedAt.toISOString(), actor: d.runnerId } },
      ...(results.length ? [{ type: 'ToolResultsRecorded' as const, data: { agentId, results } }] : []),
    ];
    try {
      const w = await appendToAgent(d.store, state, taskId, agentId, decided, { now: d.now });
      state = w.state;
      agentEvents = agentEvents.concat(w.events);
    } catch (err) {
      if (!isConcurrencyError(err)) throw err;
      // Someone else wrote this agent's stream (a newer attempt fenced it): re-read; the loop
      // goes on only if this attempt is still the current one.
      ({ state, events } = await load(taskId));
      agentEvents = events.filter((e) => e.streamId === streamId);
      d.log.warn({ taskId, agentId, attempt }, 'agent stream moved under us; re-read');
    }
  }
}

/**
 * Claim the next attempt: first on the task stream (decide admits exactly attempt n+1, so
 * competing runners serialise there), then as a fencing token on the agent's own stream — its
 * version moves, so an older attempt still running conflicts on its next append and stops.
 * Returns the fresh task, or null when another runner claimed a newer attempt first.
 */
export async function claimAttempt(d: Pick<RunnerDeps, 'store' | 'runnerId' | 'now' | 'load'>, taskId: string, agentId: string, attempt: number) {
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  try {
    await handleCommand(d.store, taskId, { type: 'StartSubagent', agentId, attempt, runnerId: d.runnerId }, { load });
  } catch (err) {
    if ((err as { code?: string }).code === 'stale_attempt') return null;
    throw err;
  }
  for (;;) {
    const loaded = await load(taskId);
    const agent = loaded.state.agents[agentId];
    if (!agent || agent.attempt !== attempt) return null;
    try {
      const w = await appendToAgent(d.store, loaded.state, taskId, agentId, [{ type: 'SubagentStarted', data: { agentId, attempt, runnerId: d.runnerId } }], { now: d.now });
      return { state: w.state, events: loaded.events.concat(w.events) };
    } catch (err) {
      if (!isConcurrencyError(err)) throw err;
    }
  }
}

function stripType<T extends { type: string }>(c: T): Omit<T, 'type'> {
  const { type: _t, ...rest } = c;
  return rest;
}

/** Files created/modified, from the recorded tool results (so a takeover runner reports them too). */
export function collectFiles(events: readonly RecordedEvent[]): { created: string[]; modified: string[] } {
  const created = new Set<string>();
  const modified = new Set<string>();
  for (const e of events) {
    if (e.type !== 'ToolResultsRecorded') continue;
    for (const r of e.data.results) {
      for (const p of r.files?.created ?? []) created.add(p);
      for (const p of r.files?.modified ?? []) if (!created.has(p)) modified.add(p);
    }
  }
  return { created: [...created].sort(), modified: [...modified].sort() };
}
