import { deletedByPlan, type EmailState, type NotifyConfig, planAcceptance, spentOf, isAgentActive, leadPhase, loopOf, type AgentLoopState, type InputWorkspace, type LeadPhase, type ModelOutage, type Budget, type PendingRequest, type PlanAcceptance, type PlanState, type RecordedEvent, type Review, type Spent, type SubtaskStatus, type TaskState, type TaskStatus, type TestCounts } from '@baton/domain';
import { oneLine } from './text.ts';
import { redactCredentials } from './webhook-url.ts';

/** The task object of API.md, built from the folded state. */
export interface TaskView {
  id: string;
  status: TaskStatus;
  prompt: string;
  team: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  requirePlanApproval: boolean;
  approvalTimeoutSeconds: number;
  metadata: Record<string, unknown>;
  forkedFrom: { taskId: string; atVersion: number } | null;
  /** The files the task started from (digest-pinned), or null. */
  workspace: InputWorkspace | null;
  pendingRequests: PendingRequestView[];
  /** The lead's phase: planning, awaiting_approval, delegating, reviewing, done, failed or cancelled. */
  lead: { phase: LeadPhase } | null;
  /** The lead's plan and each subtask's state (engineering teams), once recorded. */
  plan: PlanView | null;
  agents: {
    id: string;
    type: string;
    role: 'delegation' | 'subtask' | 'review';
    status: string;
    turns: number;
    subtaskId: string | null;
    fileLocks: string[] | null;
    filesCreated: string[];
    filesModified: string[];
    filesDeleted: string[];
    tests: TestCounts | null;
    usage: TaskView['usage'];
    summary?: string;
    error?: { code: string; message: string };
  }[];
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number };
  /** The spending limit in force and what was spent against it (tokens: input, output and cache); null: no budget. */
  budget: { limit: Budget; spent: Spent } | null;
  artifacts: { path: string; bytes: number; sha256: string; mediaType: string; agentId: string | null }[];
  /** Files agents deleted (input files or earlier artifacts), gone from the task's files: its tree, diff and archive. */
  deletedFiles: string[];
  /** Who is mailed and when (docs/email.md); null: nobody. */
  notify: NotifyConfig | null;
  /** Outbox mails the agents asked for (send_email), in the order asked: queued, sent or failed. */
  emails: EmailState[];
  result: { summary: string; reportPath?: string } | null;
  error: { code: string; message: string } | null;
  /** Who cancelled it, why and when; null unless cancelled. */
  cancellation: { reason: string; requestedBy: string; at: string } | null;
}

/** A task as `GET /v1/tasks` lists it (a summary from the read model; the full object is TaskView). */
export interface TaskListItem {
  id: string;
  status: string;
  /** The prompt's first 200 characters. */
  prompt: string;
  team: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  pendingRequests: PendingRequestView[];
  /** The task this one was forked from, and the version it was copied at, if it is a fork. */
  forkedFrom: { taskId: string; atVersion: number } | null;
}

/** A tenant's webhook endpoint, as `GET /v1/webhooks` lists it (never its secrets: they are shown once, in the answer that makes or rotates one, as `secret`). */
export interface WebhookEndpointView {
  id: string;
  /** Without credentials. */
  url: string;
  events: string[];
  createdAt: string;
  rotatedAt: string | null;
  /** Until then the previous secret signs too (after a rotation). */
  previousSecretExpiresAt: string | null;
}

/**
 * The tenant's key for its tasks' own webhooks, as `GET /v1/task-webhook-secret` shows it (never
 * the key: it is shown once, in the answer that makes or rotates it, as `secret`).
 */
export interface TaskWebhookSecretView {
  createdAt: string;
  rotatedAt: string | null;
  /** Until then the previous key signs too (after a rotation). */
  previousSecretExpiresAt: string | null;
  /** Until then the deployment's `WEBHOOK_SECRET` signs too (the receivers' move to this key). */
  deploymentSecretUntil: string | null;
}

/** One recorded attempt to deliver a task's webhook or mail, as `GET /v1/tasks/:id/deliveries` lists it. */
export interface DeliveryView {
  id: string;
  channel: 'webhook' | 'email';
  /** The tenant's endpoint it went to; null: the task's own webhook (or a mail). */
  endpointId: string | null;
  /** A person asked for this attempt (a redelivery). */
  redelivery: boolean;
  webhookId: string;
  eventId: string;
  type: string;
  /** Without credentials (a mail: its recipients). */
  url: string;
  attempt: number;
  statusCode: number | null;
  ok: boolean;
  error: string | null;
  durationMs: number;
  /** The notifiers try this message no more after this attempt: the last one allowed failed, or the receiver answered 410 Gone (a person can still send it again). */
  givenUp: boolean;
  attemptedAt: string;
}

/** A delivery the notifiers gave up on, as `GET /v1/deliveries?givenUp=true` lists it: with its task. */
export type GivenUpDeliveryView = DeliveryView & { taskId: string };

/** A configured team, as `GET /v1/teams` lists it. */
export interface TeamInfoView {
  id: string;
  description: string;
  lead: { id: string; name: string; model: string; tools: string[]; maxTurns: number; delegatesTo: string[]; reviewAgent?: string; reviewRounds?: number };
  agents: { id: string; name: string; model: string; tools: string[]; maxTurns: number; fileScope?: { allowed: string[]; blocked: string[] }; testCommand?: string }[];
  /** The approval policy's rules as configured (the most specific matching rule wins); none: each tool's own default. */
  approvals: { agent?: string; tool?: string; require: 'always' | 'never' | 'when_plan_approval'; onTimeout: 'reject' | 'approve' }[];
}

/** A task's change against its input workspace, as `GET /v1/tasks/:id/diff?format=json` gives it. */
export interface TaskChangeView {
  /** Changed files, sorted by path; the patch holds one `diff --git` section per file, in this order. */
  files: {
    path: string;
    status: 'added' | 'modified' | 'deleted';
    additions: number;
    deletions: number;
    binary: boolean;
    /** Git's mode of each side (`100755`: executable); null for the side that does not exist. */
    oldMode: '100644' | '100755' | null;
    newMode: '100644' | '100755' | null;
  }[];
  /** A git-style unified diff of every change ('' when nothing changed). */
  patch: string;
}

/** A stored file of a task, as `GET /v1/tasks/:id/artifacts` lists it. */
export type ArtifactView = TaskView['artifacts'][number];

/** A request as the API shows it: the state's own record (absent optional fields left out). */
export type PendingRequestView = PendingRequest;

export function toPendingRequestView(r: PendingRequest): PendingRequestView {
  if (r.kind === 'approval') {
    const { kind, requestId, agentId, toolUseId, toolName, input, inputDigest, plan, deadline, onTimeout, openedAt } = r;
    return { kind, requestId, agentId, toolUseId, toolName, input, inputDigest, plan, deadline, onTimeout, openedAt };
  }
  if (r.kind === 'budget') {
    const { kind, requestId, agentId, spent, limit, deadline, onTimeout, openedAt } = r;
    return { kind, requestId, agentId, spent: { ...spent, usd: roundUsd(spent.usd) }, limit, deadline, onTimeout, openedAt };
  }
  return {
    kind: 'clarification',
    requestId: r.requestId,
    agentId: r.agentId,
    toolUseId: r.toolUseId,
    questions: r.questions,
    context: r.context,
    ...(r.options ? { options: r.options } : {}),
    ...(r.deadline ? { deadline: r.deadline } : {}),
    openedAt: r.openedAt,
  };
}

export function toTaskView(s: TaskState): TaskView {
  if (s.status === 'none') throw new Error('toTaskView: the task does not exist');
  return {
    id: s.id,
    status: s.status,
    prompt: s.prompt,
    team: s.team,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    version: s.version,
    requirePlanApproval: s.requirePlanApproval,
    approvalTimeoutSeconds: s.approvalTimeoutSeconds,
    metadata: s.metadata,
    forkedFrom: s.forkedFrom,
    workspace: s.workspace,
    pendingRequests: Object.values(s.pendingRequests).map(toPendingRequestView),
    lead: s.lead ? { phase: leadPhase(s) } : null,
    plan: s.plan ? toPlanView(s.plan) : null,
    agents: Object.values(s.agents).map((a) => ({
      id: a.id,
      type: a.type,
      role: a.role,
      status: a.status,
      turns: a.turns,
      subtaskId: a.subtaskId,
      fileLocks: a.fileLocks,
      filesCreated: a.filesCreated,
      filesModified: a.filesModified,
      filesDeleted: a.filesDeleted,
      tests: a.tests,
      usage: { ...a.usage, costUsd: Math.round(a.usage.costUsd * 1e6) / 1e6 },
      ...(a.summary !== null ? { summary: a.summary } : {}),
      ...(a.error ? { error: a.error } : {}),
    })),
    usage: { ...s.usage, costUsd: Math.round(s.usage.costUsd * 1e6) / 1e6 },
    budget: s.budget ? budgetView(s.budget, spentOf(s)) : null,
    artifacts: s.artifacts.map(({ path, bytes, sha256, mediaType, agentId }) => ({ path, bytes, sha256, mediaType, agentId })),
    deletedFiles: s.deletedFiles,
    notify: s.notify,
    emails: Object.values(s.emails),
    result: s.result ? { summary: s.result.summary, ...(s.result.reportPath ? { reportPath: s.result.reportPath } : {}) } : null,
    error: s.error,
    cancellation: s.cancellation,
  };
}

export interface PlanView {
  summary: string;
  status: PlanState['status'];
  round: number;
  maxReviewRounds: number;
  reviewAgent: string | null;
  subtasks: {
    id: string;
    agent: string;
    description: string;
    fileLocks: string[];
    dependsOn: string[];
    status: SubtaskStatus;
    agentIds: string[];
    summary: string | null;
    filesCreated: string[];
    filesModified: string[];
    filesDeleted: string[];
    tests: TestCounts | null;
  }[];
  /** Every review so far, in order; the last is the verdict that stands. */
  reviews: Review[];
  /**
   * Whether the change can be taken as it stands (null while the plan runs), and why not: a task
   * ends `completed` once its lead has finished, even when the last review still asks for
   * changes or tests still fail.
   */
  acceptance: PlanAcceptance;
}

export function toPlanView(p: PlanState): PlanView {
  return {
    summary: p.summary,
    status: p.status,
    round: p.round,
    maxReviewRounds: p.maxReviewRounds,
    reviewAgent: p.reviewAgent,
    subtasks: p.subtasks.map(({ id, agent, description, fileLocks, dependsOn, status, agentIds, summary, filesCreated, filesModified, filesDeleted, tests }) => ({ id, agent, description, fileLocks, dependsOn, status, agentIds, summary, filesCreated, filesModified, filesDeleted, tests })),
    reviews: p.reviews,
    acceptance: planAcceptance(p),
  };
}

/** One agent of a task (the lead included) as `GET /v1/tasks/:id/agents` shows it. */
export interface AgentView {
  id: string;
  type: string;
  role: 'lead' | 'delegation' | 'subtask' | 'review';
  status: string;
  /** The lead's phase (the lead only). */
  phase?: LeadPhase;
  subtask: { id: string; description: string; dependsOn: string[] } | null;
  /** The paths it may change, and whether it holds them now (locks are released when it ends). */
  fileLocks: string[] | null;
  locksHeld: boolean;
  turns: number;
  /** What it is doing now, in words (null once it has ended). */
  currentAction: string | null;
  /** The lead: subtasks done of all; a subagent: its turns so far. */
  progress: { done: number; total: number } | { turns: number };
  filesCreated: string[];
  filesModified: string[];
  filesDeleted: string[];
  tests: TestCounts | null;
  /** The question it waits on, if any. */
  openQuestion: { requestId: string; questions: string[]; options?: string[] } | null;
  summary: string | null;
  error: { code: string; message: string } | null;
  /** Its model calls since its last turn that the model API could not answer (asked again later; null: none). */
  modelOutage: ModelOutage | null;
  usage: TaskView['usage'];
}

/** Every agent of the task, the lead first. */
export function toAgentViews(s: TaskState): AgentView[] {
  const out: AgentView[] = [];
  if (s.lead) {
    const done = s.plan?.subtasks.filter((t) => t.status === 'done').length ?? 0;
    const files = s.plan ? [...new Set(s.plan.subtasks.flatMap((t) => [...t.filesCreated, ...t.filesModified]))] : [];
    const leadUsage = Object.values(s.agents).reduce((u, a) => ({ ...u, inputTokens: u.inputTokens - a.usage.inputTokens, outputTokens: u.outputTokens - a.usage.outputTokens, cacheReadTokens: u.cacheReadTokens - a.usage.cacheReadTokens, cacheWriteTokens: u.cacheWriteTokens - a.usage.cacheWriteTokens, costUsd: u.costUsd - a.usage.costUsd }), s.usage);
    out.push({
      id: s.lead.agentId,
      type: s.lead.type,
      role: 'lead',
      status: s.status === 'completed' || s.status === 'failed' || s.status === 'cancelled' ? s.status : s.status === 'awaiting_input' ? 'waiting' : 'running',
      phase: leadPhase(s),
      subtask: null,
      fileLocks: null,
      locksHeld: false,
      turns: s.lead.turns,
      currentAction: currentAction(s, s.lead.agentId, s.lead, s.status !== 'completed' && s.status !== 'failed' && s.status !== 'cancelled'),
      progress: { done, total: s.plan?.subtasks.length ?? 0 },
      filesCreated: files.filter((f) => s.plan?.subtasks.some((t) => t.filesCreated.includes(f))),
      filesModified: files.filter((f) => !s.plan?.subtasks.some((t) => t.filesCreated.includes(f))),
      filesDeleted: s.plan ? deletedByPlan(s.plan) : [],
      tests: null,
      openQuestion: openQuestion(s, s.lead.agentId),
      summary: s.lead.finalText,
      error: s.status === 'failed' ? s.error : null,
      modelOutage: s.lead.modelOutage ?? null,
      usage: roundUsage(leadUsage),
    });
  }
  for (const a of Object.values(s.agents)) {
    const sub = a.subtaskId ? s.plan?.subtasks.find((t) => t.id === a.subtaskId) : undefined;
    out.push({
      id: a.id,
      type: a.type,
      role: a.role,
      status: a.status,
      subtask: sub ? { id: sub.id, description: sub.description, dependsOn: sub.dependsOn } : null,
      fileLocks: a.fileLocks,
      locksHeld: a.fileLocks !== null && (isAgentActive(a) || a.status === 'paused'),
      turns: a.turns,
      currentAction: currentAction(s, a.id, a, isAgentActive(a) || a.status === 'paused'),
      progress: { turns: a.turns },
      filesCreated: a.filesCreated,
      filesModified: a.filesModified,
      filesDeleted: a.filesDeleted,
      tests: a.tests,
      openQuestion: openQuestion(s, a.id),
      summary: a.summary,
      error: a.error,
      modelOutage: a.modelOutage ?? null,
      usage: roundUsage(a.usage),
    });
  }
  return out;
}

const roundUsd = (n: number): number => Math.round(n * 1e6) / 1e6;
const budgetView = (limit: Budget, spent: Spent): NonNullable<TaskView['budget']> => ({ limit, spent: { ...spent, usd: roundUsd(spent.usd) } });
const roundUsage = (u: TaskView['usage']): TaskView['usage'] => ({ ...u, costUsd: Math.max(0, Math.round(u.costUsd * 1e6) / 1e6) });

function openQuestion(s: TaskState, agentId: string): AgentView['openQuestion'] {
  const r = Object.values(s.pendingRequests).find((x) => x.kind === 'clarification' && x.agentId === agentId);
  return r && r.kind === 'clarification' ? { requestId: r.requestId, questions: r.questions, ...(r.options ? { options: r.options } : {}) } : null;
}

/** What an agent is doing, from its loop: thinking (a model turn is due), running tools, or waiting — on whom. */
function currentAction(s: TaskState, agentId: string, loop: AgentLoopState, live: boolean): string | null {
  if (!live) return null;
  // Held at the budget: no model call until a person decides (not "thinking", which it is not).
  const budgetOpen = Object.values(s.pendingRequests).some((r) => r.kind === 'budget');
  if (s.agents[agentId]?.heldByBudget || (budgetOpen && agentId === s.lead?.agentId)) return 'paused at the budget: waiting for a person to raise it or stop the run';
  const l = loopOf(s, agentId) ?? loop;
  const tests = s.agents[agentId]?.tests;
  if (l.phase === 'model' && l.modelOutage) return `waiting for the model API: ${l.modelOutage.failures} failed ${l.modelOutage.failures === 1 ? 'call' : 'calls'} since ${l.modelOutage.since} (asked again later; last: ${oneLine(l.modelOutage.error, 120)})`;
  if (l.phase === 'model') return l.turns === 0 ? 'starting' : `thinking (turn ${l.turns + 1})${tests ? ` · last tests: ${tests.passed} passed, ${tests.failed} failed` : ''}`;
  if (l.phase === 'done') return 'finishing';
  const waiting = l.openToolUses.filter((t) => t.state !== 'resolved');
  const on = (st: string): string[] => waiting.filter((t) => t.state === st).map((t) => t.name);
  if (on('awaiting_approval').length) return `waiting for approval of ${on('awaiting_approval').join(', ')}`;
  if (on('awaiting_answer').length) return 'waiting for an answer';
  if (on('dispatched').length) {
    if (s.plan && waiting.some((t) => t.toolUseId === s.plan?.toolUseId)) {
      if (s.plan.status === 'reviewing') return 'waiting for the review';
      // In a round of changes the subtasks the review sent back run again: counted afresh, the round named (not 2/2 done going back to 0/2).
      const round = s.plan.round > 0 ? `, round ${s.plan.round} of changes` : '';
      return `running the plan${round} (${s.plan.subtasks.filter((t) => t.status === 'done').length}/${s.plan.subtasks.length} subtasks done)`;
    }
    return 'waiting for subagents';
  }
  return waiting.length ? [...new Set(waiting.map(describeCall))].join(', ') : 'recording results';
}

/** A tool call in words, as a person follows it: "searching: …", "writing report.md", "running tests". */
export function describeCall(t: { name: string; input: Record<string, unknown> }): string {
  const arg = (k: string): string => {
    const v = t.input[k];
    return typeof v === 'string' ? oneLine(v, 60) : '';
  };
  switch (t.name) {
    case 'web_search':
      return `searching: ${arg('query')}`;
    case 'write_file':
      return `writing ${arg('path')}`;
    case 'edit_file':
      return `editing ${arg('path')}`;
    case 'read_file':
      return `reading ${arg('path')}`;
    case 'list_directory':
      return `listing ${arg('path') || '.'}`;
    case 'glob':
    case 'search_files':
      return `looking for ${arg('pattern')}`;
    case 'run_command':
      return `running: ${arg('command')}`;
    case 'run_tests':
      return 'running tests';
    default:
      return `running ${t.name}`;
  }
}

/** The event object of API.md. */
export interface EventView {
  id: string;
  type: string;
  taskId: string;
  streamId: string;
  version: number;
  position: number;
  recordedAt: string;
  data: unknown;
  metadata: unknown;
}

export function toEventView(e: RecordedEvent): EventView {
  return {
    id: e.id,
    type: e.type,
    taskId: e.taskId,
    streamId: e.streamId,
    version: e.version,
    position: Number(e.position),
    recordedAt: e.recordedAt.toISOString(),
    data: e.data,
    metadata: e.metadata,
  };
}

/**
 * An event's view as the API and webhooks show it (from the log, or as the relay sent it): a
 * webhook URL registered with credentials (before they were refused) without them.
 */
export function publicEventView(view: EventView): EventView {
  if (view.type !== 'TaskSubmitted') return view;
  const data = view.data as { webhook?: { url: string } | null };
  if (!data.webhook) return view;
  return { ...view, data: { ...data, webhook: { ...data.webhook, url: redactCredentials(data.webhook.url) } } };
}
