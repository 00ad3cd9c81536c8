import { agentStreamId, isFinal, isToolUse, textOf, type Command, type RecordedEvent, type TaskState, type ToolResult, type ToolUseBlock } from '@baton/domain';
import { allTools, approvalFor, askPerson, buildConversation, builtinTeams, findAgent, parseToolInput, toolSpec, type AgentDefinition, type ModelClient, type TeamCatalog, type TeamDefinition } from '@baton/agents';
import { appendToAgent, handleCommand, isConcurrencyError, loadTask, type EventStore, type TaskLoader } from '@baton/event-store';
import type { CorpusHit, StoredArtifact } from '@baton/storage';
import type { Logger } from '@baton/runtime';
import { DEFAULT_LIMITS, SandboxFencedError, type Sandbox, type SandboxProvider, type SandboxSpec } from '@baton/sandbox';
import { fileScopeViolation, MUTATING_TOOLS } from './files.ts';
import { runTool, type ToolEnv } from './tools.ts';

export interface RunnerDeps {
  store: EventStore;
  model: ModelClient;
  teams?: Readonly<Record<string, TeamDefinition>>;
  /** Resolves a run's pinned config version (default: the current `teams`, versions ignored). */
  catalog?: TeamCatalog;
  /** Where agents work (local bubblewrap or E2B). */
  sandboxes: SandboxProvider;
  /** Where produced files are kept (Postgres); absent → files stay in the sandbox only. */
  artifacts?: ArtifactStore;
  /** The offline web search (full-text corpus). */
  search?: (query: string, limit: number) => Promise<CorpusHit[]>;
  /** The host environment, from which an agent's config may pass named variables into its sandbox. */
  hostEnv?: Readonly<Record<string, string | undefined>>;
  runnerId: string;
  now: () => Date;
  log: Logger;
  /** How tasks are loaded (default: a full re-read); the service passes a TaskCache's load. */
  load?: TaskLoader;
  /** Called with events committed on the task stream (the service publishes their wake-ups at once). */
  committed?: (events: RecordedEvent[]) => void;
  /** Called just before a tool runs, with the agent stream version the runner had seen (crash tests audit this). */
  audit?: (entry: { taskId: string; agentId: string; toolUseId: string; tool: string; seenVersion: number }) => void;
}

/** A job's cause is not readable yet (not expected: the relay publishes only committed events); the job is retried. */
export class CauseNotVisibleError extends Error {
  constructor(eventId: string) {
    super(`event ${eventId} is not readable yet`);
    this.name = new.target.name;
  }
}

export type JobOutcome = 'completed' | 'failed' | 'paused' | 'cancelled' | 'superseded' | 'nothing-to-do';

/**
 * Run (or resume) one subagent. Ownership is fenced in Postgres, not by NATS acks: the
 * runner records `SubagentStarted` with the next attempt number, writes each turn to the
 * agent's own stream at the version it read (a concurrent writer makes it conflict), and
 * completes only if its attempt is still the current one. A job redelivered after a crash
 * resumes from the last recorded turn; a tool whose result was recorded never runs again.
 *
 * A tool call that needs a person (ask_user, or a tool the approval policy gates) opens a
 * request on the task stream; the agent is then paused and the job ends, holding nothing.
 * The decision makes a new job, which resumes here: the decided outcome becomes the tool
 * result (or the approved input is run), and the loop goes on.
 */
export async function runSubagentJob(
  d: RunnerDeps,
  taskId: string,
  agentId: string,
  heartbeat: () => void,
  opts: { signal?: AbortSignal; /** The event that made the job: it must be readable before the state is trusted. */ causeEventId?: string } = {},
): Promise<JobOutcome> {
  const { signal } = opts;
  const teams = d.teams ?? builtinTeams;
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  const initial = await load(taskId);
  // Never act on a state older than the job's cause (it would look like nothing to do).
  if (opts.causeEventId && !initial.events.some((e) => e.id === opts.causeEventId)) throw new CauseNotVisibleError(opts.causeEventId);
  const agent0 = initial.state.agents[agentId];
  if (!agent0 || isFinal(initial.state) || (agent0.status !== 'dispatched' && agent0.status !== 'running')) return 'nothing-to-do';
  const team = d.catalog ? await d.catalog.resolve(initial.state.team, initial.state.lead?.configVersion) : teams[initial.state.team];
  const def = team ? findAgent(team, agent0.type) : undefined;
  if (!team || !def) {
    await handleCommand(d.store, taskId, { type: 'FailSubagent', agentId, code: 'unknown_agent', message: `agent type '${agent0.type}' is not configured in team '${initial.state.team}'` }, { load });
    return 'failed';
  }
  const attempt = agent0.attempt + 1;
  const claimed = await claimAttempt(d, taskId, agentId, attempt);
  if (!claimed) return 'superseded';
  let { state, events } = claimed;
  let sandbox: Sandbox;
  try {
    sandbox = await d.sandboxes.open(sandboxSpec(d, def, taskId, agentId, attempt));
  } catch (err) {
    if (err instanceof SandboxFencedError) return 'superseded';
    throw err;
  }
  if ((state.agents[agentId]?.turns ?? 0) === 0) await seedInputs(d, sandbox, state, taskId);
  const streamId = agentStreamId(taskId, agentId);
  let agentEvents: RecordedEvent[] = events.filter((e) => e.streamId === streamId);
  const tools = def.tools.map((n) => allTools[n]).filter((t) => t !== undefined).map(toolSpec);
  const env: ToolEnv = { sandbox, testCommand: def.testCommand, search: d.search, signal };
  const ctx: TurnContext = { d, team, def, env, taskId, agentId };
  const loop = async (): Promise<JobOutcome> => {
    /** Append to the agent's stream; false if a newer attempt moved it (then re-read). */
    const record = async (decided: Parameters<typeof appendToAgent>[4]): Promise<boolean> => {
      try {
        const w = await appendToAgent(d.store, state, taskId, agentId, decided, { now: d.now });
        state = w.state;
        agentEvents = agentEvents.concat(w.events);
        return true;
      } catch (err) {
        if (!isConcurrencyError(err)) throw err;
        ({ state, events } = await load(taskId));
        agentEvents = events.filter((e) => e.streamId === streamId);
        d.log.warn({ taskId, agentId, attempt }, 'agent stream moved under us; re-read');
        return false;
      }
    };

    for (;;) {
      signal?.throwIfAborted();
      heartbeat();
      // The task as others see it: cancelled, or this attempt superseded, stops the job here.
      const fresh = (await load(taskId)).state;
      const current = fresh.agents[agentId];
      if (isFinal(fresh) || current?.status === 'cancelled') return 'cancelled';
      const agent = state.agents[agentId];
      if (!agent || !current || current.attempt !== attempt || agent.attempt !== attempt || agent.status !== 'running') return 'superseded';

      // Resume: tool calls of the last turn that have no result yet.
      const open = unresolvedToolUses(agentEvents);
      if (open.length > 0) {
        const step = await resolveToolUses(ctx, fresh, open, agent.streamVersion);
        if (step.results.length > 0 && !(await record([{ type: 'ToolResultsRecorded', data: { agentId, results: step.results } }]))) continue;
        if (step.requests.length > 0 || step.waiting) return openRequests(ctx, step.requests, attempt, load);
        continue;
      }

      const last = agentEvents[agentEvents.length - 1];
      const finished = last?.type === 'ModelTurnRecorded' && last.data.stopReason !== 'tool_use';
      if (finished || agent.turns >= def.maxTurns) {
        const capped = !finished;
        const files = collectFiles(agentEvents);
        const stored = await storeOutputs(d, sandbox, taskId, agentId, files);
        const summary = capped
          ? `stopped after reaching the iteration cap of ${def.maxTurns} turns. ${last?.type === 'ModelTurnRecorded' ? textOf(last.data.content) : ''}`.trim()
          : last?.type === 'ModelTurnRecorded' ? textOf(last.data.content) : '';
        try {
          const done = await handleCommand(d.store, taskId, (s) => {
            const a = s.agents[agentId];
            if (!a || a.status !== 'running' || a.attempt !== attempt) return null;
            return [
              ...stored.map((x): Command => ({ type: 'StoreArtifact', agentId, path: x.path, bytes: x.bytes, sha256: x.sha256, mediaType: x.mediaType })),
              { type: 'CompleteSubagent', agentId, attempt, summary, filesCreated: files.created, filesModified: files.modified, success: !capped, iterationCapReached: capped },
            ];
          }, { load });
          d.committed?.(done.events);
        } catch (err) {
          const code = (err as { code?: string }).code;
          if (code === 'stale_attempt') return 'superseded';
          if (code === 'task_final') return 'cancelled';
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
      // Run what can run now; the turn and those results are recorded together (one append).
      const step = res.stopReason === 'tool_use' ? await resolveToolUses(ctx, fresh, res.content.filter(isToolUse), agent.streamVersion) : { results: [], requests: [], waiting: false };
      const turn = {
        agentId,
        turn: agent.turns + 1,
        model: res.model,
        content: res.content,
        stopReason: res.stopReason,
        usage: res.usage,
        offline: res.offline,
        durationMs: d.now().getTime() - startedAt.getTime(),
      };
      const recorded = await record([
        { type: 'ModelTurnRecorded', data: turn, metadata: { startedAt: startedAt.toISOString(), actor: d.runnerId } },
        ...(step.results.length ? [{ type: 'ToolResultsRecorded' as const, data: { agentId, results: step.results } }] : []),
      ]);
      if (recorded && step.requests.length > 0) return openRequests(ctx, step.requests, attempt, load);
    }
  };

  let outcome: JobOutcome;
  try {
    outcome = await loop();
  } catch (err) {
    if (err instanceof SandboxFencedError) return 'superseded';
    throw err;
  }
  // The sandbox follows the agent: paused (nothing held) while it waits for a person, gone once
  // it is done or its task was cancelled; a superseded job leaves it to the newer attempt.
  if (outcome === 'paused') await d.sandboxes.pause(sandbox);
  else if (outcome === 'completed' || outcome === 'cancelled') await d.sandboxes.kill(taskId, agentId);
  return outcome;
}

/** Files kept as a task's artifacts (the bytes go to Postgres; ArtifactStored records them). */
export interface ArtifactStore {
  store(a: { taskId: string; path: string; agentId: string; content: Buffer }): Promise<StoredArtifact>;
  read(taskId: string, path: string): Promise<Buffer | null>;
}

function sandboxSpec(d: RunnerDeps, def: AgentDefinition, taskId: string, agentId: string, attempt: number): SandboxSpec {
  const env: Record<string, string> = {};
  for (const name of def.sandbox?.env ?? []) {
    const v = d.hostEnv?.[name];
    if (v !== undefined) env[name] = v;
  }
  return { taskId, agentId, attempt, network: def.sandbox?.network ?? false, env, limits: { ...DEFAULT_LIMITS, ...def.sandbox?.limits } };
}

/** A new agent's workspace starts with the task's artifacts so far (the researcher's notes, for the writer). */
async function seedInputs(d: RunnerDeps, sandbox: Sandbox, state: TaskState, taskId: string): Promise<void> {
  if (!d.artifacts || state.artifacts.length === 0) return;
  for (const a of state.artifacts) {
    const content = await d.artifacts.read(taskId, a.path);
    if (content) await sandbox.files.write(a.path, content);
  }
  await sandbox.sync();
}

/** Store the files an agent created or modified as artifacts (before it is recorded as complete). */
async function storeOutputs(d: RunnerDeps, sandbox: Sandbox, taskId: string, agentId: string, files: { created: string[]; modified: string[] }): Promise<StoredArtifact[]> {
  if (!d.artifacts) return [];
  const out: StoredArtifact[] = [];
  for (const file of [...files.created, ...files.modified]) {
    const { bytes, size } = await sandbox.files.readBytes(file).catch(() => ({ bytes: null, size: 0 }));
    if (!bytes || size > bytes.length) {
      d.log.warn({ taskId, agentId, file, size }, 'file not stored as an artifact (gone, or too large)');
      continue;
    }
    out.push(await d.artifacts.store({ taskId, path: file, agentId, content: bytes }));
  }
  return out;
}

type RequestCommand = Extract<Command, { type: 'RequestApproval' | 'RequestClarification' }>;

interface TurnContext {
  d: RunnerDeps;
  team: TeamDefinition;
  def: AgentDefinition;
  env: ToolEnv;
  taskId: string;
  agentId: string;
}

/** The tool_use blocks of the agent's last turn that have no recorded result. */
export function unresolvedToolUses(agentEvents: readonly RecordedEvent[]): ToolUseBlock[] {
  let i = agentEvents.length - 1;
  const answered = new Set<string>();
  for (; i >= 0; i--) {
    const e = agentEvents[i] as RecordedEvent;
    if (e.type === 'ToolResultsRecorded') for (const r of e.data.results) answered.add(r.toolUseId);
    if (e.type === 'ModelTurnRecorded') break;
  }
  const turn = agentEvents[i];
  if (!turn || turn.type !== 'ModelTurnRecorded' || turn.data.stopReason !== 'tool_use') return [];
  return turn.data.content.filter(isToolUse).filter((u) => !answered.has(u.id));
}

/**
 * For each tool call: run it, or take the outcome of a person's decision, or say which request
 * must be opened first. A request that is open already means the agent must wait.
 */
async function resolveToolUses(ctx: TurnContext, task: TaskState, uses: readonly ToolUseBlock[], seenVersion: number): Promise<{ results: ToolResult[]; requests: RequestCommand[]; waiting: boolean }> {
  const { d, team, def, env, taskId, agentId } = ctx;
  const results: ToolResult[] = [];
  const requests: RequestCommand[] = [];
  let waiting = false;
  let changed = false;
  const deadline = new Date(d.now().getTime() + task.approvalTimeoutSeconds * 1000).toISOString();
  const exec = async (call: ToolUseBlock): Promise<void> => {
    const violation = fileScopeViolation(def.fileScope, call.name, call.input);
    if (violation) {
      results.push({ toolUseId: call.id, toolName: call.name, content: violation, isError: true });
      return;
    }
    d.audit?.({ taskId, agentId, toolUseId: call.id, tool: call.name, seenVersion });
    results.push(await runTool(call, def.tools, env));
    if (MUTATING_TOOLS.has(call.name)) changed = true;
  };
  for (const call of uses) {
    const tool = allTools[call.name];
    if (!tool || !def.tools.includes(call.name)) {
      results.push(await runTool(call, def.tools, env)); // an error result naming the allowed tools; nothing runs
      continue;
    }
    const person = tool.runsIn === 'person';
    const policy = approvalFor(team.approvals, task, def.id, tool);
    if (!person && !policy.required) {
      await exec(call);
      continue;
    }
    // Tool-use ids are unique per agent, not per task: the request id names the agent too.
    const requestId = `${person ? 'clr' : 'apr'}-${agentId}-${call.id}`;
    const decided = task.decidedRequests[requestId];
    if (decided?.result) {
      results.push({ toolUseId: call.id, toolName: call.name, content: decided.result.content, isError: decided.result.isError });
    } else if (decided?.approvedInput) {
      await exec({ ...call, input: decided.approvedInput });
    } else if (task.pendingRequests[requestId]) {
      waiting = true;
    } else {
      const parsed = parseToolInput(tool, call.input);
      if (!parsed.ok) {
        results.push({ toolUseId: call.id, toolName: call.name, content: parsed.error, isError: true });
        continue;
      }
      requests.push(askPerson({ tool, call, parsed: parsed.value, requestId, agentId, deadline, plan: `${def.name} (${agentId}) wants to call ${call.name}.`, onTimeout: policy.onTimeout }));
    }
  }
  // The workspace is made durable before the results that describe it are recorded.
  if (changed) await env.sandbox.sync();
  return { results, requests, waiting };
}

/** Open the agent's requests on the task stream (it pauses with the first); the job then ends. */
async function openRequests(ctx: TurnContext, requests: readonly RequestCommand[], attempt: number, load: TaskLoader): Promise<JobOutcome> {
  for (const cmd of requests) {
    const { requestId } = cmd;
    try {
      await handleCommand(ctx.d.store, ctx.taskId, (s) => {
        const a = s.agents[ctx.agentId];
        if (s.pendingRequests[requestId] || s.decidedRequests[requestId]) return null; // opened already (a retried job)
        return a && a.attempt === attempt && (a.status === 'running' || a.status === 'paused') ? cmd : null;
      }, { load });
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'task_final') return 'cancelled';
      throw err;
    }
  }
  return 'paused';
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
