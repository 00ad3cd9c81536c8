import type { AgentView, EventView, TaskView } from '@baton/api';
import { excerpt } from '@baton/api/text';

type PendingRequest = TaskView['pendingRequests'][number];

/** Is the event on the task stream (`task-<id>`), not on an agent's own stream (`agent-<id>-<agent>`)? Task-stream events are the versions a task can be shown at or forked from. */
export const onTaskStream = (e: EventView): boolean => e.streamId.startsWith('task-');

type Content = { type: string; text?: string; name?: string; input?: Record<string, unknown> }[];

/** A budget's measures in words: "$0.02, 2573 tokens" (a measure with no limit left out). */
const measures = (v: unknown): string => {
  const m = (v ?? {}) as { usd?: number | null; tokens?: number | null };
  const parts = [typeof m.usd === 'number' ? `$${m.usd >= 1 ? m.usd.toFixed(2) : m.usd.toFixed(4)}` : null, typeof m.tokens === 'number' ? `${m.tokens} tokens` : null].filter(Boolean);
  return parts.join(', ') || 'no limit';
};

/**
 * What an approval with edits changed in the call: each top-level field of the input that differs
 * from what the agent asked (`requested`), as `field: before → after` (values shortened); an
 * empty list when nothing differs or the request is not known.
 */
export function editsOf(requested: Record<string, unknown> | undefined, granted: Record<string, unknown>, n = 80): string[] {
  if (!requested) return [];
  const short = (v: unknown): string => {
    const t = v === undefined ? '∅' : JSON.stringify(v);
    return t.length > n ? `${t.slice(0, n - 1)}…` : t;
  };
  const keys = [...new Set([...Object.keys(requested), ...Object.keys(granted)])];
  return keys.filter((k) => JSON.stringify(requested[k]) !== JSON.stringify(granted[k])).map((k) => `${k}: ${short(requested[k])} → ${short(granted[k])}`);
}

/** What an event says, in a line (`all`: the task's events, for what a line refers back to — an approval's edits against its request). */
export function describe(e: EventView, all: readonly EventView[] = []): string {
  const d = (e.data ?? {}) as Record<string, unknown>;
  const s = (v: unknown, n = 160): string => {
    const t = typeof v === 'string' ? v : JSON.stringify(v);
    return t.length > n ? `${t.slice(0, n - 1)}…` : t;
  };
  switch (e.type) {
    case 'TaskSubmitted':
      return `submitted: ${s(d.prompt)}`;
    case 'TaskStarted':
      return `the lead (${s(d.leadAgentType)}) starts`;
    case 'ModelTurnRecorded': {
      const content = (d.content ?? []) as Content;
      const text = content.filter((b) => b.type === 'text').map((b) => b.text).join(' ');
      const tools = content.filter((b) => b.type === 'tool_use').map((b) => b.name);
      return `turn ${String(d.turn)}${text ? `: ${s(text)}` : ''}${tools.length ? ` → ${tools.join(', ')}` : ''}`;
    }
    case 'ToolResultsRecorded':
      return ((d.results ?? []) as { toolName: string; content: string; isError?: boolean }[]).map((r) => `${r.toolName}${r.isError ? ' ✗' : ''}: ${s(r.content, 100)}`).join(' · ');
    case 'ModelUnavailable':
      return `${s(d.agentId)}'s model could not answer (asked again later): ${s(d.error, 160)}`;
    case 'AgentReminded':
      return `${s(d.agentId)} is reminded: ${s(d.text, 160)}`;
    case 'ApprovalRequested':
      return `asks approval for ${s(d.toolName)}`;
    case 'ApprovalGranted': {
      if (!d.edited) return `approved by ${s(d.decidedBy)}`;
      const asked = all.find((x) => x.type === 'ApprovalRequested' && (x.data as { requestId?: unknown }).requestId === d.requestId);
      const edits = editsOf((asked?.data as { input?: Record<string, unknown> } | undefined)?.input, (d.input ?? {}) as Record<string, unknown>);
      return `approved with edits by ${s(d.decidedBy)}${edits.length > 0 ? `: ${edits.join('; ')}` : ''}`;
    }
    case 'ApprovalRejected':
      return `rejected by ${s(d.decidedBy)}: ${s(d.reason)}`;
    case 'ApprovalTimedOut':
      return `no decision before the deadline (${s(d.action)})`;
    case 'ClarificationRequested':
      return `asks: ${((d.questions ?? []) as string[]).join(' / ')}`;
    case 'ClarificationAnswered':
      return `answered by ${s(d.answeredBy)}: ${((d.answers ?? []) as string[]).join(' / ')}`;
    case 'SubagentDispatched':
      return `${s(d.agentId)} dispatched: ${s(d.prompt, 120)}`;
    case 'SubagentStarted':
      // A runner records each attempt twice: its claim on the task stream, then on the agent's own stream (the fence).
      return onTaskStream(e) ? `${s(d.agentId)} runs (attempt ${String(d.attempt)} on ${s(d.runnerId)})` : `${s(d.agentId)} takes its own stream for attempt ${String(d.attempt)} (an older attempt still running is fenced off)`;
    case 'SubagentHandedBack':
      return `${s(d.agentId)}'s attempt ${String(d.attempt)} handed back by ${s(d.runnerId)} (${s(d.reason, 100)}): the next attempt takes it up`;
    case 'SubagentPaused':
      return `${s(d.agentId)} paused: the budget is reached`;
    case 'SubagentCompleted':
      return `${s(d.agentId)} finished: ${s(d.summary, 120)}`;
    case 'SubagentFailed':
      return `${s(d.agentId)} failed (${s(d.code)}): ${s(d.message)}`;
    case 'BudgetExceeded': {
      // What was spent in the measures that have a limit.
      const limit = (d.limit ?? {}) as { usd?: number | null; tokens?: number | null };
      const spent = (d.spent ?? {}) as { usd?: number; tokens?: number };
      return `budget reached (${measures({ usd: limit.usd != null ? spent.usd : null, tokens: limit.tokens != null ? spent.tokens : null })} spent, limit ${measures(limit)})`;
    }
    case 'BudgetRaised':
      return `budget raised to ${measures(d.limit)} by ${s(d.decidedBy)}`;
    case 'ArtifactStored':
      return `stored ${s(d.path)} (${String(d.bytes)} bytes)`;
    case 'FileDeleted':
      return `deleted ${s(d.path)}`;
    case 'PlanRecorded':
      return `plan: ${s(d.summary)}`;
    case 'ReviewRecorded':
      return `review: ${s(d.verdict).replace('_', ' ')} — ${s(d.summary, 120)}`;
    case 'TaskCompleted':
      return `completed: ${s(d.summary)}`;
    case 'TaskFailed':
      return `failed (${s(d.code)}): ${s(d.message)}`;
    case 'TaskCancelled':
      return `cancelled by ${s(d.requestedBy)}: ${s(d.reason)}`;
    case 'BudgetRefused':
      return d.timedOut ? 'budget: no decision before the deadline (stopped)' : `budget: stopped by ${s(d.decidedBy)}: ${s(d.reason)}`;
    case 'ClarificationTimedOut':
      return 'no answer before the deadline (the agent goes on with its best judgement)';
    case 'EmailRequested':
      return `mail queued to ${((d.to ?? []) as string[]).join(', ')}: ${s(d.subject)}`;
    case 'EmailSent':
      return `mail sent (${((d.accepted ?? []) as string[]).join(', ') || 'no recipient accepted'})${((d.rejected ?? []) as string[]).length ? `; refused: ${((d.rejected ?? []) as string[]).join(', ')}` : ''}`;
    case 'EmailFailed':
      return `mail not sent (${s(d.code)}): ${s(d.message)}`;
    default:
      return e.type;
  }
}

/** Whose the event is: its agent, else `task`. */
export const agentOf = (e: EventView): string => {
  const d = (e.data ?? {}) as { agentId?: unknown };
  return typeof d.agentId === 'string' ? d.agentId : onTaskStream(e) ? 'task' : e.streamId.split('-').at(-1) ?? '';
};

const turns = (n: number): string => `${n} turn${n === 1 ? '' : 's'}`;

/** An agent's progress, in a line (its toast): the lead's subtasks done, a subagent's turns and tests. */
export function progressText(a: Pick<AgentView, 'progress' | 'turns' | 'tests'>): string {
  if ('done' in a.progress) return a.progress.total > 0 ? `${a.progress.done}/${a.progress.total} subtasks done · ${turns(a.turns)}` : turns(a.turns);
  return `${turns(a.turns)}${a.tests ? ` · tests ${a.tests.passed} passed, ${a.tests.failed} failed` : ''}`;
}

/** A request's title, as its card's heading says it: "lead wants to call submit_plan → researcher", "researcher asks", "The task reached its budget". */
export function requestTitle(r: PendingRequest): string {
  if (r.kind === 'approval') return `${r.agentId} wants to call ${r.toolName}${typeof r.input.agent === 'string' ? ` → ${r.input.agent}` : ''}`;
  if (r.kind === 'budget') return 'The task reached its budget';
  return `${r.agentId} asks`;
}

/** A task's status in words ("awaiting input"). */
export const statusText = (status: string): string => status.replace(/_/g, ' ');

/** The events that close an approval. */
const CLOSES_APPROVAL = new Set(['ApprovalGranted', 'ApprovalRejected', 'ApprovalTimedOut']);

/** What closed approval `requestId`, in the timeline's words ("rejected by key:…: too broad"); null: not among `events` (yet). */
export function closingOf(events: readonly EventView[], requestId: string): string | null {
  const closing = events.findLast((e) => CLOSES_APPROVAL.has(e.type) && (e.data as { requestId?: unknown } | null)?.requestId === requestId);
  return closing ? describe(closing, events) : null;
}

/**
 * What a person who cannot see the page is told when a task they have open changes on its own:
 * its new status, and each request that came in (what it asks). Nothing for the page's first
 * load (`before` null: what they opened is not news), nor when nothing they would act on changed.
 */
export function taskNews(before: Pick<TaskView, 'status' | 'pendingRequests' | 'error'> | null, now: Pick<TaskView, 'status' | 'pendingRequests' | 'error'>): string {
  if (!before) return '';
  const known = new Set(before.pendingRequests.map((r) => r.requestId));
  const news: string[] = [];
  if (before.status !== now.status) {
    if (now.status === 'completed') news.push('The task completed.');
    else if (now.status === 'failed') news.push(`The task failed${now.error ? `: ${now.error.message}` : ''}.`);
    else if (now.status === 'cancelled') news.push('The task was cancelled.');
    else news.push(`The task is now ${statusText(now.status)}.`);
  }
  for (const r of now.pendingRequests) {
    if (known.has(r.requestId)) continue;
    if (r.kind === 'approval') news.push(`Waiting for your approval: ${requestTitle(r)}.`);
    else if (r.kind === 'budget') news.push('Waiting for your decision: the task reached its budget.');
    else news.push(`Waiting for your answer: ${r.agentId} asks ${r.questions.join(' ')}`);
  }
  return news.join(' ');
}

/** The most of a report rendered at once: a 1.5 MB one kept the page from answering for half a minute. */
export const MAX_RENDERED_REPORT_CHARS = 200_000;

/** A long report's start, cut at a line's end near the limit and never through a character (the mail's `excerpt`). Pure. */
export const reportStart = (report: string, max = MAX_RENDERED_REPORT_CHARS): string => excerpt(report, max);
