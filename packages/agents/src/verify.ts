import { activeAgents, canonicalJson, digestJson, evolve, initialState, isFinal, loopOf, schedulePlan, type Command, type RecordedEvent, type TaskState } from '@baton/domain';
import { triageToolUses, type Triage } from './loop.ts';
import { findAgent, type AgentDefinition, type TeamDefinition } from './teams.ts';

/**
 * The determinism check (`baton verify`): walk a run's log and, at every event that records a
 * decision of the code — a request opened, a subagent dispatched, a plan recorded, a tool call
 * refused (a tool the agent may not use, input that does not parse, a path outside its file
 * scope or locks), another model turn asked for (not past the agent's turn limit), an agent
 * stopped at its turn limit, the task completed or failed at the lead's — ask the current code
 * what it decides from the state folded so far, with the run's recorded model outputs and tool
 * results as its inputs. Side-effect free: no model is called, no tool runs, nothing is written.
 * The first event where the code would decide otherwise is reported; a run the code would make
 * again event for event is identical. What the model said and what a tool returned are inputs,
 * not decisions, and are not compared; neither are clocks (deadlines) nor the plan text shown.
 */
export type VerifyResult =
  | { identical: true; checked: number; events: number; /** The log holds the task's end (false: identical so far, the run goes on). */ ended: boolean }
  | {
      identical: false;
      checked: number;
      events: number;
      ended: boolean;
      /** The first event the current code would not record. */
      at: { position: number; streamId: string; version: number; type: string };
      /** What the log says happened there. */
      recorded: string;
      /** What the current code decides at that point instead. */
      decided: string[];
      /**
       * Where the nearest decision of the same kind (the same agent, request or subagent) differs
       * from the recorded one: the first field, and in a text the first character that differs with
       * what is around it in both — what `recorded` and `decided`, cut to a line, may not show.
       * Absent when the code decides nothing of that kind there.
       */
      difference?: string;
    };

type Decision = Extract<Command, { type: 'RequestApproval' | 'RequestClarification' | 'DispatchSubagent' | 'RecordPlan' }>;

/**
 * `team`: the configuration checked with; `recordedTeam`: the one the run was made with, when
 * known (a refusal it recorded that `team` would not make is then a divergence too).
 */
export function verifyRun(events: readonly RecordedEvent[], team: TeamDefinition, recordedTeam: TeamDefinition | null = team): VerifyResult {
  let s: TaskState = initialState();
  let checked = 0;
  const ended = events.some((e) => e.type === 'TaskCompleted' || e.type === 'TaskFailed' || e.type === 'TaskCancelled');
  for (const e of events) {
    const problem = check(s, e, team, recordedTeam);
    if (problem !== undefined) {
      checked++;
      if (problem !== null) {
        const difference = problem.decisions ? firstDifference(e, problem.decisions) : null;
        return { identical: false, checked, events: events.length, ended, at: { position: Number(e.position), streamId: e.streamId, version: e.version, type: e.type }, recorded: describeEvent(e), decided: problem.decided, ...(difference ? { difference } : {}) };
      }
    }
    s = evolve(s, e);
  }
  return { identical: true, checked, events: events.length, ended: ended || isFinal(s) };
}

/** undefined: not a decision; null: the code decides the same; otherwise what it decides instead (and the decisions, to say where they differ). */
function check(s: TaskState, e: RecordedEvent, team: TeamDefinition, recordedTeam: TeamDefinition | null): { decided: string[]; decisions?: Decision[] } | null | undefined {
  // No decision of the kind recorded: what the code does with that call instead (refuses it, runs it without asking), or `none`.
  const compared = (decisions: Decision[], none: string, agentId: string, toolUseId: string) =>
    decisions.some((d) => sameDecision(d, e)) ? null : { decided: decisions.length > 0 ? decisions.map(describeDecision) : [fateOf(triageOf(s, agentId, e.recordedAt, team), toolUseId) ?? none], decisions };
  switch (e.type) {
    case 'ApprovalRequested':
    case 'ClarificationRequested':
    case 'PlanRecorded':
      return compared(decisionsOf(s, e.data.agentId, e.recordedAt, team), 'nothing here', e.data.agentId, e.data.toolUseId);
    case 'SubagentDispatched': {
      const leadId = s.lead?.agentId;
      return compared([...(leadId ? decisionsOf(s, leadId, e.recordedAt, team) : []), ...schedulePlan(s)], 'no dispatch here', leadId ?? '', e.data.toolUseId);
    }
    case 'ToolResultsRecorded': {
      // A result the code decides without running anything (a refusal) must be the one recorded;
      // a call it would now send to a person or a subagent must not have a result; a refusal the
      // run's own configuration made that this one would not make is a call it would now run.
      const t = triageOf(s, e.data.agentId, e.recordedAt, team);
      if (!t) return undefined;
      const then = recordedTeam && recordedTeam !== team ? triageOf(s, e.data.agentId, e.recordedAt, recordedTeam) : t;
      const out: string[] = [];
      for (const r of e.data.results) {
        const refused = t.results.find((x) => x.toolUseId === r.toolUseId);
        if (refused) {
          if (refused.content !== r.content || !r.isError) out.push(`refuses ${r.toolName} (${r.toolUseId}): ${refused.content}`);
          continue;
        }
        const held = t.asks.find((a) => a.toolUseId === r.toolUseId);
        if (held) out.push(`asks a person first: ${describeDecision(held)}`);
        const sent = t.dispatches.find((d) => d.toolUseId === r.toolUseId);
        if (sent) out.push(`hands it on: ${describeDecision(sent)}`);
        const wasRefused = then?.results.find((x) => x.toolUseId === r.toolUseId);
        if (!held && !sent && wasRefused && wasRefused.content === r.content && r.isError) out.push(`runs ${r.toolName} (${r.toolUseId}) instead of refusing it as recorded`);
      }
      return out.length > 0 ? { decided: out } : null;
    }
    case 'ModelTurnRecorded': {
      // Another model turn: asked only below the agent's turn limit.
      const loop = loopOf(s, e.data.agentId);
      const def = defOf(s, e.data.agentId, team);
      if (!loop || !def) return undefined;
      return loop.turns < def.maxTurns ? null : { decided: [`asks no model turn ${loop.turns + 1}: ${e.data.agentId} is at its limit of ${def.maxTurns} turns (it ends here)`] };
    }
    case 'SubagentCompleted': {
      // Stopped at the turn limit: only there.
      if (!e.data.iterationCapReached) return undefined;
      const loop = loopOf(s, e.data.agentId);
      const def = defOf(s, e.data.agentId, team);
      if (!loop || !def) return undefined;
      return loop.turns >= def.maxTurns ? null : { decided: [`does not stop ${e.data.agentId} here: it has used ${loop.turns} of its ${def.maxTurns} turns`] };
    }
    case 'TaskFailed': {
      // The lead at its turn limit (other failures are not the code's decision from the log: a model error, a budget a person stopped).
      if (e.data.code !== 'max_turns' || !s.lead) return undefined;
      return s.lead.turns >= team.lead.maxTurns ? null : { decided: [`does not fail the task here: the lead has used ${s.lead.turns} of its ${team.lead.maxTurns} turns`] };
    }
    case 'TaskCompleted': {
      const lead = s.lead;
      // Its final answer; or, at its turn limit once its plan completed, the plan's outcome (leadCapped).
      const capped = e.data.leadCapped === true && lead?.phase === 'model' && lead.turns >= team.lead.maxTurns && s.plan?.status === 'completed';
      const ok = lead !== null && (lead.phase === 'done' || capped) && activeAgents(s).length === 0;
      return ok ? null : { decided: [`does not complete the task here (lead ${lead ? lead.phase : 'not started'})`] };
    }
    default:
      return undefined;
  }
}

/** The agent's definition in `team`: the lead's, or its type's. */
function defOf(s: TaskState, agentId: string, team: TeamDefinition): AgentDefinition | undefined {
  if (s.lead?.agentId === agentId) return team.lead;
  const type = s.agents[agentId]?.type;
  return type ? findAgent(team, type) : undefined;
}

function triageOf(s: TaskState, agentId: string, at: Date, team: TeamDefinition): Triage | null {
  const def = defOf(s, agentId, team);
  if (!def) return null;
  return triageToolUses({ state: s, agentId, team, def, runsIn: s.lead?.agentId === agentId ? 'orchestrator' : 'runner', now: at, plan: () => '' });
}

/** What the code does with one call in a triage: refuses it (saying what), runs it, asks, hands it on; null: none of these. */
function fateOf(t: Triage | null, toolUseId: string): string | null {
  if (!t) return null;
  const refused = t.results.find((r) => r.toolUseId === toolUseId);
  if (refused) return `refuses ${refused.toolName} (${toolUseId}): ${refused.content}`;
  const run = t.runs.find((r) => r.call.id === toolUseId);
  if (run) return `runs ${run.call.name} (${toolUseId}) without asking a person`;
  const decided = [...t.asks, ...t.dispatches].find((d) => d.toolUseId === toolUseId);
  return decided ? describeDecision(decided) : null;
}

function decisionsOf(s: TaskState, agentId: string, at: Date, team: TeamDefinition): Decision[] {
  const t = triageOf(s, agentId, at, team);
  return t ? [...t.asks, ...t.dispatches] : [];
}

/** The same decision, clocks and the plan text aside: every field `comparedFields` names the same. */
function sameDecision(d: Decision, e: RecordedEvent): boolean {
  const fields = comparedFields(d, e);
  return fields !== null && fields.every(([, now, then]) => sameValue(now, then));
}

/**
 * The fields a decision is compared on, as [name, the decision's value, the recorded value] (an
 * absent default at the deadline is a rejection, an absent role a delegation, an absent subtask
 * or lock list none); null when the decision is of another kind than the event.
 */
function comparedFields(d: Decision, e: RecordedEvent): [string, unknown, unknown][] | null {
  const data = e.data as Record<string, unknown>;
  const decided = d as Record<string, unknown>;
  const fields = (names: string[], defaults: Record<string, unknown> = {}): [string, unknown, unknown][] => names.map((n) => (n in defaults ? [n, decided[n] ?? defaults[n], data[n] ?? defaults[n]] : [n, decided[n], data[n]]));
  if (d.type === 'RequestApproval' && e.type === 'ApprovalRequested') return fields(['requestId', 'toolUseId', 'toolName', 'input', 'onTimeout'], { onTimeout: 'reject' });
  if (d.type === 'RequestClarification' && e.type === 'ClarificationRequested') return fields(['requestId', 'toolUseId', 'questions']);
  if (d.type === 'DispatchSubagent' && e.type === 'SubagentDispatched') return fields(['agentId', 'agentType', 'toolUseId', 'subtaskId', 'role', 'fileLocks', 'prompt'], { role: 'delegation', subtaskId: null, fileLocks: null });
  if (d.type === 'RecordPlan' && e.type === 'PlanRecorded') return fields(['toolUseId', 'subtasks', 'reviewAgent', 'maxReviewRounds']);
  return null;
}

/** A field's two values the same: objects and arrays as JSON values (key order aside), the rest strictly. */
const sameValue = (a: unknown, b: unknown): boolean => ((a !== null && typeof a === 'object') || (b !== null && typeof b === 'object') ? sameJson(a, b) : a === b);

/**
 * Where the nearest decision of the event's kind differs from it (the one that differs in the
 * fewest fields, the first such): the field, and for a text (or JSON) the first character that
 * differs, with some of what is around it in both. Pure.
 */
function firstDifference(e: RecordedEvent, decisions: readonly Decision[]): string | null {
  let best: [string, unknown, unknown][] | null = null;
  for (const d of decisions) {
    const fields = comparedFields(d, e);
    if (!fields) continue;
    const differing = fields.filter(([, now, then]) => !sameValue(now, then));
    if (differing.length > 0 && (best === null || differing.length < best.length)) best = differing;
  }
  const first = best?.[0];
  if (!first) return null;
  const [field, now, then] = first;
  // Texts as themselves; other values as canonical JSON (keys sorted, as the comparison ignores their order); by code point (an emoji is one).
  const text = (v: unknown): string[] => Array.from(typeof v === 'string' ? v : canonicalJson(v));
  const [a, b] = [text(then), text(now)];
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const around = (t: string[]): string => JSON.stringify(`${i > 40 ? '…' : ''}${t.slice(Math.max(0, i - 40), i + 60).join('')}${t.length > i + 60 ? '…' : ''}`);
  const more = best && best.length > 1 ? ` (and ${best.length - 1} more field${best.length > 2 ? 's' : ''})` : '';
  // One is the other with more at its end: said so, not "differs at character 11 of 10".
  if (i === a.length || i === b.length) return `${field}${more}: ${i === a.length ? 'now' : 'recorded'} goes on after the ${i} characters both have: recorded ${around(a)}, now ${around(b)}`;
  return `${field}${more} differs at character ${i + 1} of ${a.length}: recorded ${around(a)}, now ${around(b)}`;
}

/** Equal as JSON values (key order aside). */
const sameJson = (a: unknown, b: unknown): boolean => digestJson(a) === digestJson(b);

const cut = (t: string, n = 160): string => (t.length > n ? `${t.slice(0, n - 1)}…` : t);

function describeDecision(d: Decision): string {
  switch (d.type) {
    case 'RequestApproval':
      return `ApprovalRequested ${d.requestId}: ${d.agentId} asks to call ${d.toolName} ${cut(JSON.stringify(d.input))}`;
    case 'RequestClarification':
      return `ClarificationRequested ${d.requestId}: ${d.agentId} asks ${cut(d.questions.join(' / '))}`;
    case 'DispatchSubagent':
      return `SubagentDispatched ${d.agentId} (${d.agentType}${d.subtaskId ? `, subtask ${d.subtaskId}` : ''}): ${cut(d.prompt)}`;
    case 'RecordPlan':
      // Everything the comparison looks at, so that two plans that differ read differently.
      return cut(
        `PlanRecorded: ${d.subtasks.map((t) => `${t.id} → ${t.agent} [${t.fileLocks.join(' ')}]${t.dependsOn.length ? ` after ${t.dependsOn.join(', ')}` : ''} "${cut(t.description, 40)}"`).join(', ')}; ${d.reviewAgent ? `reviewed by ${d.reviewAgent}, at most ${d.maxReviewRounds} round${d.maxReviewRounds === 1 ? '' : 's'} of changes` : 'no review'}`,
        600,
      );
  }
}

/** What the log says happened: a recorded decision in the same words as the code's own (describeDecision). */
function describeEvent(e: RecordedEvent): string {
  switch (e.type) {
    case 'ApprovalRequested':
      return describeDecision({ type: 'RequestApproval', ...e.data });
    case 'ClarificationRequested':
      return describeDecision({ type: 'RequestClarification', ...e.data });
    case 'SubagentDispatched':
      return describeDecision({ type: 'DispatchSubagent', ...e.data });
    case 'PlanRecorded':
      return describeDecision({ type: 'RecordPlan', ...e.data });
    case 'ToolResultsRecorded':
      return `ToolResultsRecorded for ${e.data.agentId}: ${e.data.results.map((r) => `${r.toolName}${r.isError ? ' (error)' : ''}: ${cut(r.content, 80)}`).join('; ')}`;
    default:
      return e.type;
  }
}
