import { z } from 'zod';
import { ContentBlock, StopReason, TestCounts, ToolResult, Usage } from './content.ts';
import { EMAIL_BODY_MAX, EMAIL_MAX_ATTACHMENTS, EMAIL_SUBJECT_MAX, EmailAddress, EmailAttachment, MAX_MAIL_RECIPIENTS, NotifyConfig } from './email.ts';
import { PlanSubtask, ReviewIssue, ReviewVerdict } from './plan.ts';

/**
 * Every event Baton records. One zod schema per event type validates what is appended
 * (from HTTP, NATS or a service) and documents the log's shape. Events are facts, named
 * in the past tense; each failure mode has its own event.
 *
 * Streams: `task-<taskId>` holds every fact that changes the task's status or the lead's
 * conversation (including subagent start/finish, so the `tasks` read model stays exact);
 * `agent-<taskId>-<agentId>` holds one subagent's own turns and tool results.
 */

export const CURRENT_SCHEMA_VERSION = 1;

const AgentId = z.string().min(1).max(100).regex(/^[a-z0-9][a-z0-9_-]*$/, 'lowercase letters, digits, - and _');
const RequestId = z.string().min(1).max(100);
const TimeoutAction = z.enum(['reject', 'approve']);

/** The lead's agent id on every task (subagents are `<type>-<n>`). */
export const LEAD_AGENT_ID = 'lead';

/**
 * The webhook messages besides `event.<EventType>` (docs/webhooks.md): the task's status changes,
 * each request a person is asked (once), a subagent's moments.
 */
export const WEBHOOK_MESSAGE_TYPES = ['task.running', 'task.awaiting_input', 'task.completed', 'task.failed', 'task.cancelled', 'request.opened', 'agent.started', 'agent.awaiting_input', 'agent.completed', 'agent.failed'] as const;
/** The types subscribed to when a webhook names none. */
export const DEFAULT_WEBHOOK_TYPES = ['task.completed', 'task.failed', 'task.cancelled', 'task.awaiting_input'];

export const WebhookConfig = z.object({
  url: z.url({ protocol: /^https?$/ }),
  events: z.array(z.string().min(1)).min(1).default(DEFAULT_WEBHOOK_TYPES),
});
export type WebhookConfig = z.infer<typeof WebhookConfig>;

/**
 * The files a task starts from (an upload or a configured example), pinned by content digest:
 * every agent of the run, a fork and a resume on another replica see exactly these files.
 * The bytes are in Postgres (`input_workspaces`), addressed by the digest.
 */
export const InputWorkspace = z.object({
  /** sha256 over the sorted (path, mode, content digest) list: the same files give the same digest. */
  digest: z.string().regex(/^[0-9a-f]{64}$/),
  source: z.enum(['upload', 'example']),
  /** The example's name, or the upload's file name if one was given. */
  name: z.string().max(255).nullable(),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
});
export type InputWorkspace = z.infer<typeof InputWorkspace>;

/**
 * A spending limit on a task: US dollars and/or tokens (every token its models read or wrote —
 * input, output and cache — over the lead and every subagent). null: no limit on that measure.
 */
export const Budget = z.object({
  usd: z.number().positive().nullable().default(null),
  tokens: z.number().int().positive().nullable().default(null),
});
export type Budget = z.infer<typeof Budget>;
/** What a task has spent, in the budget's measures. */
export const Spent = z.object({ usd: z.number().nonnegative(), tokens: z.number().int().nonnegative() });
export type Spent = z.infer<typeof Spent>;

export const eventDataSchemas = {
  TaskSubmitted: z.object({
    prompt: z.string().min(1),
    team: z.string().min(1),
    requirePlanApproval: z.boolean(),
    approvalTimeoutSeconds: z.number().int().positive(),
    webhook: WebhookConfig.nullable(),
    metadata: z.record(z.string(), z.unknown()),
    tenantId: z.string().min(1),
    requestHash: z.string().nullable(),
    forkedFrom: z.object({ taskId: z.uuid(), atVersion: z.number().int().positive() }).nullable().default(null),
    workspace: InputWorkspace.nullable().default(null),
    /** Its spending limit (the request's, else its tenant's default); null: none. */
    budget: Budget.nullable().default(null),
    /** Who is mailed and when (the request's, else its tenant's default); null or absent: nobody (docs/email.md). */
    notify: NotifyConfig.nullable().optional(),
    /**
     * The version of the team's configuration the gateway accepted the task with (recorded in
     * team_configs): the lead starts on it — also on an orchestrator that has not loaded it yet
     * (a rolling update adding a team). Absent in older logs: the orchestrator's current one.
     */
    configVersion: z.string().min(1).optional(),
  }),
  TaskStarted: z.object({ leadAgentId: AgentId, leadAgentType: z.string().min(1), configVersion: z.string().min(1) }),
  ModelTurnRecorded: z.object({
    agentId: AgentId,
    turn: z.number().int().positive(),
    model: z.string().min(1),
    content: z.array(ContentBlock),
    stopReason: StopReason,
    usage: Usage,
    offline: z.boolean(),
    durationMs: z.number().nonnegative(),
  }),
  ToolResultsRecorded: z.object({ agentId: AgentId, results: z.array(ToolResult).min(1) }),
  /**
   * The agent's model call failed because the model API could not answer (429, 5xx, 529, a cut
   * connection, a stalled answer), after its client's own retries: `error` is the API's words.
   * The call is asked again later; the first of these since the agent's last turn starts its
   * model outage (`AgentLoopState.modelOutage`), which ends it `model_unavailable` once it has
   * lasted the model client's outage limit (ANTHROPIC_OUTAGE_LIMIT_MS).
   */
  ModelUnavailable: z.object({ agentId: AgentId, error: z.string() }),
  /**
   * The agent ended its turns without what its role needs (a reviewer without `submit_review`):
   * `text` is sent to it as the next user message, and a model turn is due again. Once per agent
   * (`AgentLoopState.reminders`); what it is reminded of is its host's policy (`reminderFor`).
   */
  AgentReminded: z.object({ agentId: AgentId, text: z.string().min(1) }),
  ApprovalRequested: z.object({
    requestId: RequestId,
    agentId: AgentId,
    toolUseId: z.string().min(1),
    toolName: z.string().min(1),
    input: z.record(z.string(), z.unknown()),
    inputDigest: z.string().min(1),
    plan: z.string(),
    deadline: z.iso.datetime(),
    /** What the deadline does if nobody decides (from the approval policy). */
    onTimeout: TimeoutAction.default('reject'),
  }),
  // Decisions name the agent they resume (absent in events recorded before it was added),
  // so the relay can route a runner job without reading the task.
  // `idempotencyKey`: the decision request's Idempotency-Key, if it sent one (the same key again is answered as this decision).
  ApprovalGranted: z.object({ requestId: RequestId, input: z.record(z.string(), z.unknown()), edited: z.boolean(), decidedBy: z.string(), agentId: AgentId.optional(), idempotencyKey: z.string().optional() }),
  ApprovalRejected: z.object({ requestId: RequestId, reason: z.string(), decidedBy: z.string(), agentId: AgentId.optional(), idempotencyKey: z.string().optional() }),
  ApprovalTimedOut: z.object({ requestId: RequestId, action: TimeoutAction, agentId: AgentId.optional() }),
  ClarificationRequested: z.object({
    requestId: RequestId,
    agentId: AgentId,
    toolUseId: z.string().min(1),
    questions: z.array(z.string().min(1)).min(1),
    context: z.string(),
    options: z.array(z.string()).optional(),
    deadline: z.iso.datetime().optional(),
  }),
  ClarificationAnswered: z.object({ requestId: RequestId, answers: z.array(z.string()).min(1), answeredBy: z.string(), agentId: AgentId.optional(), idempotencyKey: z.string().optional() }),
  /** Nobody answered before the deadline: the agent is told so and goes on with its best judgement. */
  ClarificationTimedOut: z.object({ requestId: RequestId, agentId: AgentId.optional() }),
  SubagentDispatched: z.object({
    agentId: AgentId,
    agentType: z.string().min(1),
    toolUseId: z.string().min(1),
    prompt: z.string().min(1),
    /** Why it runs: a Task delegation (default), a subtask of the lead's plan, or the plan's review. */
    // (Absent: a Task delegation, as every dispatch was before plans.)
    role: z.enum(['delegation', 'subtask', 'review']).optional(),
    subtaskId: z.string().min(1).optional(),
    /** The only paths the agent may create, change or delete (a subtask's locks); absent: its config's file scope alone. */
    fileLocks: z.array(z.string().min(1)).optional(),
    /** 0: the plan's first build; n: the n-th round of changes a review asked for. */
    round: z.number().int().nonnegative().optional(),
  }),
  SubagentStarted: z.object({ agentId: AgentId, attempt: z.number().int().positive(), runnerId: z.string().min(1) }),
  /**
   * The runner of this attempt stopped gracefully (a deployment, a scale-down) and aborted it
   * before it was done: the job goes back to the queue and the next attempt takes it up. Such an
   * attempt was not lost to the agent's own work, so it does not count toward the attempts lost
   * in a row (`stalledAttempts`) after which the watchdog gives the agent up.
   */
  SubagentHandedBack: z.object({ agentId: AgentId, attempt: z.number().int().positive(), runnerId: z.string().min(1), reason: z.string() }),
  SubagentCompleted: z.object({
    agentId: AgentId,
    attempt: z.number().int().positive(),
    summary: z.string(),
    filesCreated: z.array(z.string()),
    filesModified: z.array(z.string()),
    /** Files of the task it deleted (each also a FileDeleted); absent when none. */
    filesDeleted: z.array(z.string()).optional(),
    success: z.boolean(),
    iterationCapReached: z.boolean().default(false),
    /** The counts of its last test run (run_tests), if it ran tests. */
    tests: TestCounts.optional(),
  }),
  SubagentFailed: z.object({ agentId: AgentId, code: z.string().min(1), message: z.string() }),
  /** The subagent stopped before a model call, holding nothing, until a person decides on the budget. */
  SubagentPaused: z.object({ agentId: AgentId, attempt: z.number().int().positive(), reason: z.literal('budget') }),
  /**
   * The task reached its budget: a request of kind `budget` opens, no agent calls a model until
   * a person raises the limit (BudgetRaised) or stops the run (BudgetRefused, then TaskFailed).
   */
  BudgetExceeded: z.object({
    requestId: RequestId,
    /** The agent that found the budget reached (about to call its model). */
    agentId: AgentId,
    spent: Spent,
    limit: Budget,
    deadline: z.iso.datetime(),
    /** What the deadline does if nobody decides: stop the run. */
    onTimeout: z.literal('stop').default('stop'),
  }),
  /** A person raised the limit: the run goes on; `resumes` are the subagents it paused, each given a new job. */
  BudgetRaised: z.object({ requestId: RequestId, limit: Budget, decidedBy: z.string(), resumes: z.array(AgentId).default([]), idempotencyKey: z.string().optional() }),
  /** A person (or the deadline) stopped the run at its budget; TaskFailed follows. */
  BudgetRefused: z.object({ requestId: RequestId, reason: z.string(), decidedBy: z.string(), timedOut: z.boolean(), idempotencyKey: z.string().optional() }),
  /** The lead's plan, as approved (possibly edited): the scheduler runs it. */
  PlanRecorded: z.object({
    agentId: AgentId,
    /** The lead's tool use that submitted it: open until the plan has run (and been reviewed). */
    toolUseId: z.string().min(1),
    summary: z.string(),
    subtasks: z.array(PlanSubtask).min(1),
    /** The agent type that reviews the change once every subtask is done (null: no review). */
    reviewAgent: z.string().min(1).nullable(),
    /** How many rounds of changes a review may ask for before the plan completes with its verdict. */
    maxReviewRounds: z.number().int().nonnegative(),
  }),
  /** A reviewer's structured verdict on the change. */
  ReviewRecorded: z.object({
    agentId: AgentId,
    round: z.number().int().nonnegative(),
    verdict: ReviewVerdict,
    issues: z.array(ReviewIssue),
    summary: z.string(),
    /**
     * Which subtasks a round of changes gives which issues (indexes into `issues`), as decided
     * when the review was recorded (`reworkFor`). Absent — reviews recorded before it was, or
     * with no round of changes to come — the fold routes them as it did then: each issue to every
     * subtask whose locks hold its file.
     */
    rework: z.array(z.object({ subtaskId: z.string(), issues: z.array(z.number().int().nonnegative()) })).optional(),
  }),
  ArtifactStored: z.object({
    agentId: AgentId.nullable(),
    path: z.string().min(1),
    bytes: z.number().int().nonnegative(),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    mediaType: z.string().min(1),
    /**
     * The file's permission bits (`mode & 0o777`) as the agent left it: an executable stays one,
     * a chmod is a change. Absent in events recorded before modes were kept: the input file's
     * mode then, or 0644 for a file the task created.
     */
    mode: z.number().int().min(0).max(0o777).optional(),
  }),
  /**
   * An agent deleted a file of the task (a command removed it): an input file or an earlier
   * artifact. It leaves the task's files — its artifacts, tree, diff and archive, and the
   * workspaces later agents start from — until a later ArtifactStored of the path. Committed
   * with the agent's SubagentCompleted, as its ArtifactStored are.
   */
  FileDeleted: z.object({
    agentId: AgentId.nullable(),
    path: z.string().min(1),
  }),
  /**
   * An agent asked for a mail (send_email): the outbox. The notifier delivers it once, from the
   * log, and records EmailSent or EmailFailed. `emailId` is derived from the task, the agent and
   * its tool use, so a tool call run again records nothing new.
   */
  EmailRequested: z.object({
    emailId: z.uuid(),
    agentId: AgentId,
    toolUseId: z.string().min(1),
    to: z.array(EmailAddress).min(1).max(MAX_MAIL_RECIPIENTS),
    subject: z.string().min(1).max(EMAIL_SUBJECT_MAX),
    /** Markdown; the mail carries it as text and rendered as HTML. */
    body: z.string().max(EMAIL_BODY_MAX),
    attachments: z.array(EmailAttachment).max(EMAIL_MAX_ATTACHMENTS).default([]),
  }),
  /** The SMTP server accepted the outbox mail (recorded by the notifier; may follow the task's final event). */
  EmailSent: z.object({ emailId: z.uuid(), messageId: z.string().min(1), accepted: z.array(z.string()), rejected: z.array(z.string()).default([]) }),
  /** The outbox mail was not delivered and will not be tried again (may follow the task's final event). */
  EmailFailed: z.object({ emailId: z.uuid(), code: z.string().min(1), message: z.string() }),
  TaskCancelled: z.object({ reason: z.string(), requestedBy: z.string() }),
  TaskCompleted: z.object({
    summary: z.string(),
    reportPath: z.string().nullable(),
    /** The lead reached its turn limit after its plan completed, before a final answer: `summary` is the plan's outcome, not the lead's words. */
    leadCapped: z.literal(true).optional(),
  }),
  TaskFailed: z.object({ code: z.string().min(1), message: z.string() }),
} as const;

export type EventType = keyof typeof eventDataSchemas;
export const EVENT_TYPES = Object.keys(eventDataSchemas) as EventType[];
export type EventData<T extends EventType> = z.infer<(typeof eventDataSchemas)[T]>;

export const EventMetadata = z.looseObject({
  causationId: z.string().optional(),
  correlationId: z.string().optional(),
  actor: z.string().optional(),
  schemaVersion: z.number().int().positive().optional(),
  /** Wall-clock time at which the step that produced the event began (ISO string). */
  startedAt: z.string().optional(),
  /** The same instant as epoch milliseconds with a fractional part (for sub-millisecond latency figures). */
  startedAtMs: z.number().optional(),
  /** W3C trace context of the work that decided the event (only when tracing is on): the relay puts it on the event's messages. */
  traceparent: z.string().optional(),
  tracestate: z.string().optional(),
});
export type EventMetadata = z.infer<typeof EventMetadata>;

/** An event as decided, before it has a place in the log. */
export type NewEvent = { [T in EventType]: { id: string; type: T; data: EventData<T>; metadata?: EventMetadata } }[EventType];
export type NewEventOf<T extends EventType> = Extract<NewEvent, { type: T }>;

/** An event as read from the log. */
export type RecordedEvent = {
  [T in EventType]: {
    id: string;
    type: T;
    taskId: string;
    streamId: string;
    version: number;
    position: bigint;
    recordedAt: Date;
    data: EventData<T>;
    metadata: EventMetadata;
    schemaVersion: number;
  };
}[EventType];
export type RecordedEventOf<T extends EventType> = Extract<RecordedEvent, { type: T }>;

export const NewEventSchema = z.discriminatedUnion(
  'type',
  EVENT_TYPES.map((type) =>
    z.object({ id: z.uuid(), type: z.literal(type), data: eventDataSchemas[type], metadata: EventMetadata.optional() }),
  ) as unknown as [z.ZodObject, ...z.ZodObject[]],
);

/** Validate an event before it is appended; the error names the offending field. */
export function parseNewEvent(input: unknown): NewEvent {
  return NewEventSchema.parse(input) as NewEvent;
}

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(eventDataSchemas, type);
}

// Stream ids, spelled here only.
const TASK_STREAM_PREFIX = 'task-';
const AGENT_STREAM_PREFIX = 'agent-';
export const taskStreamId = (taskId: string): string => `${TASK_STREAM_PREFIX}${taskId}`;
export const agentStreamId = (taskId: string, agentId: string): string => `${AGENT_STREAM_PREFIX}${taskId}-${agentId}`;
export const isTaskStream = (streamId: string): boolean => streamId.startsWith(TASK_STREAM_PREFIX);
/** The agent id of an agent stream of `taskId` (null for the task stream or another task's stream). */
export function agentOfStream(taskId: string, streamId: string): string | null {
  const prefix = agentStreamId(taskId, '');
  return streamId.startsWith(prefix) ? streamId.slice(prefix.length) : null;
}

/**
 * Which stream a decided event belongs to: a subagent's own steps (STEP_EVENT_TYPES), and the
 * attempt that claims its stream (`claim`), go to `agent-<taskId>-<agentId>` (its isolated
 * context); everything else to the task stream.
 */
export function streamOf(taskId: string, e: { type: EventType; data: unknown }, leadAgentId: string | null, claim = false): string {
  if (claim || isStepEvent(e.type)) {
    const agentId = (e.data as { agentId: string }).agentId;
    if (agentId !== leadAgentId) return agentStreamId(taskId, agentId);
  }
  return taskStreamId(taskId);
}

/** Where and when an event sits in the log. */
export interface LogPlace {
  taskId: string;
  streamId: string;
  version: number;
  position: bigint;
  recordedAt: Date;
}

/** An event as recorded at a place in the log: the one way a new (or decided) event becomes a RecordedEvent. */
export function recordAs(e: { id: string; type: EventType; data: unknown; metadata?: EventMetadata | undefined }, at: LogPlace): RecordedEvent {
  return { id: e.id, type: e.type, data: e.data, metadata: e.metadata ?? {}, schemaVersion: CURRENT_SCHEMA_VERSION, ...at } as RecordedEvent;
}

/**
 * An agent's steps: its model turns and tool results (and model calls the API could not answer, and
 * reminders it was sent), many per run. Nothing reacts to them but
 * live views (they wake nobody and change no status), so they are not relayed to the bus: a
 * live view is woken by a tick the writer sends after the commit, and reads Postgres.
 * Every other event is a transition — of the task, an agent, a request — and is relayed.
 */
export const STEP_EVENT_TYPES: readonly EventType[] = ['ModelTurnRecorded', 'ToolResultsRecorded', 'ModelUnavailable', 'AgentReminded'];
export const isStepEvent = (type: string): boolean => STEP_EVENT_TYPES.includes(type as EventType);

/**
 * Events after which the task is final: no transition of the task, its agents or its requests
 * may follow them on the task stream — only the outcome of an outbox mail requested before
 * (EmailSent, EmailFailed), which the notifier records whenever the SMTP server answers.
 */
export const TERMINAL_EVENT_TYPES: ReadonlySet<EventType> = new Set(['TaskCompleted', 'TaskFailed', 'TaskCancelled']);

/**
 * Decisions on a request: they wake the agent that asked (the lead through the orchestrator, a
 * subagent through a runner job).
 */
const DECISION_TYPES: ReadonlySet<EventType> = new Set<EventType>(['ApprovalGranted', 'ApprovalRejected', 'ApprovalTimedOut', 'ClarificationAnswered', 'ClarificationTimedOut']);

/**
 * Who an event wakes: the lead (the orchestrator advances the task) and/or a paused subagent
 * (a runner job resumes it). A decision wakes only the agent that asked.
 */
export function wakes(e: { type: EventType; data: unknown }): { lead: boolean; subagents: string[] } {
  if (DECISION_TYPES.has(e.type)) {
    const agentId = (e.data as { agentId?: string }).agentId;
    if (agentId && agentId !== LEAD_AGENT_ID) return { lead: false, subagents: [agentId] };
    return { lead: true, subagents: [] };
  }
  // A request the lead opened itself: the orchestrator whose step opened it arms its deadline as
  // the step ends (and every deadline poller finds it in the `tasks` table), and the lead waits
  // for the answer. Waking the orchestrator again would only re-read the task to find that out.
  if (REQUEST_EVENT_TYPES.has(e.type) && (e.data as { agentId: string }).agentId === LEAD_AGENT_ID) return { lead: false, subagents: [] };
  if (e.type === 'SubagentDispatched') return { lead: false, subagents: [(e.data as { agentId: string }).agentId] };
  // A raised budget resumes the lead and every subagent the budget paused.
  if (e.type === 'BudgetRaised') return { lead: true, subagents: (e.data as { resumes?: string[] }).resumes ?? [] };
  return { lead: LEAD_TRIGGER_TYPES.has(e.type), subagents: [] };
}

/** Events that open a request with a deadline (a person's answer, or a raised budget, is awaited). */
export const REQUEST_EVENT_TYPES: ReadonlySet<EventType> = new Set<EventType>(['ApprovalRequested', 'ClarificationRequested', 'BudgetExceeded']);

export const LEAD_TRIGGER_TYPES: ReadonlySet<EventType> = new Set<EventType>([
  'TaskSubmitted',
  // A request opened by a subagent: the orchestrator arms its deadline timer (the lead's own
  // requests wake nobody: see `wakes`).
  'ApprovalRequested',
  'ClarificationRequested',
  'ApprovalGranted',
  'ApprovalRejected',
  'ApprovalTimedOut',
  'ClarificationAnswered',
  'ClarificationTimedOut',
  'SubagentCompleted',
  'SubagentFailed',
  // A plan was recorded: the scheduler dispatches its first subtasks.
  'PlanRecorded',
  // The budget was reached by a subagent (the orchestrator arms the request's deadline) or raised (the run goes on).
  'BudgetExceeded',
  'BudgetRaised',
]);
