import type { TestCounts, ToolResult, Usage } from './content.ts';
import type { PlanSubtask, ReviewIssue, ReviewVerdict } from './plan.ts';
import type { EmailState, NotifyConfig } from './email.ts';
import type { Budget, InputWorkspace, Spent, WebhookConfig } from './events.ts';

export const TASK_STATUSES = ['pending', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export type FinalStatus = Extract<TaskStatus, 'completed' | 'failed' | 'cancelled'>;

/** paused: the subagent asked a person and holds nothing while it waits. */
export type AgentStatus = 'dispatched' | 'running' | 'paused' | 'completed' | 'failed' | 'cancelled';

export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

/**
 * Where an agent's loop stands — the same for the lead and every subagent, folded from its
 * turns and tool results: `model` (its next model turn is due), `tools` (waiting on the tool
 * uses of its last turn), `done` (it gave its final answer).
 */
export interface AgentLoopState {
  turns: number;
  phase: 'model' | 'tools' | 'done';
  /** The tool uses of its last turn that have no recorded result yet. */
  openToolUses: OpenToolUse[];
  /** The text of its final turn. */
  finalText: string | null;
  /** Its final turn was a refusal (stop reason `refusal`): it ends failed, not done. */
  refused?: boolean;
  /** Its model calls since its last turn failed because the model API could not answer (ModelUnavailable); absent: none did. */
  modelOutage?: ModelOutage;
  /** How many times it was reminded after a final answer (AgentReminded; at most MAX_REMINDERS); absent: never. */
  reminders?: number;
}

/** How many reminders one agent may be sent (AgentReminded): one; an agent that ignores it ends as it would have. */
export const MAX_REMINDERS = 1;

/** Model calls of one agent the API could not answer, since its last recorded turn. */
export interface ModelOutage {
  /** When the first of them was recorded. */
  since: string;
  failures: number;
  /** The API's words on the last one. */
  error: string;
}

/**
 * Whether an agent whose model call just failed as unavailable has waited for the model long
 * enough to give up (`limitMs`: the model client's outage limit; undefined: never): its outage
 * began `limitMs` or more before `now`. The first failure begins one, so a limit never ends an
 * agent on its first failed call.
 */
export function modelOutageOver(loop: Pick<AgentLoopState, 'modelOutage'>, now: Date, limitMs: number | undefined): boolean {
  return limitMs !== undefined && loop.modelOutage !== undefined && now.getTime() - Date.parse(loop.modelOutage.since) >= limitMs;
}

export interface AgentState extends AgentLoopState {
  id: string;
  type: string;
  status: AgentStatus;
  toolUseId: string;
  prompt: string;
  /** Runner attempts so far; a newer attempt fences off older ones. */
  attempt: number;
  /**
   * Attempts in a row, the current one included, that have recorded nothing on the agent's
   * stream (no model turn, no tool result); any turn or result resets it. Attempts that keep
   * ending this way mean the agent's runner keeps dying on it (a crash, out of memory, a kill):
   * the watchdog gives up after a few instead of starting it forever.
   */
  stalledAttempts: number;
  /** The current attempt was handed back by its stopping runner (SubagentHandedBack): not counted in stalledAttempts, and not handed back twice. */
  handedBack: boolean;
  /** Version of the agent's own stream `agent-<taskId>-<agentId>`. */
  streamVersion: number;
  filesCreated: string[];
  filesModified: string[];
  /** Files of the task it deleted. */
  filesDeleted: string[];
  summary: string | null;
  error: { code: string; message: string } | null;
  usage: UsageTotals;
  /** Why it runs: a Task delegation, a subtask of the plan, or the plan's review. */
  role: 'delegation' | 'subtask' | 'review';
  subtaskId: string | null;
  /** The only paths it may change (its subtask's locks), held while it is active; null: no locks. */
  fileLocks: string[] | null;
  round: number;
  /** Its latest test run's counts. */
  tests: TestCounts | null;
  /** Paused by the budget (not by a request of its own): a raised budget resumes it. */
  heldByBudget: boolean;
}

export type SubtaskStatus = 'pending' | 'running' | 'done' | 'failed' | 'skipped' | 'cancelled';

export interface SubtaskState extends PlanSubtask {
  status: SubtaskStatus;
  /** The agents that worked on it, in order (the first build, then each round of changes). */
  agentIds: string[];
  summary: string | null;
  filesCreated: string[];
  filesModified: string[];
  filesDeleted: string[];
  tests: TestCounts | null;
  /** The review issues its next round must address (set when a review asks for changes). */
  rework: ReviewIssue[] | null;
}

export interface Review {
  agentId: string;
  round: number;
  verdict: ReviewVerdict;
  issues: ReviewIssue[];
  summary: string;
  /** The reviewer's last test run as its review was recorded (the suite on everyone's change); null or absent: it ran none. */
  tests?: TestCounts | null;
}

/**
 * The lead's plan as it runs: `running` while subtasks build (or rebuild), `reviewing` while the
 * review agent works, then `completed` (every subtask done, the review settled) or `failed`
 * (a subtask failed — its dependents are skipped — or the review could not be made).
 */
export interface PlanState {
  toolUseId: string;
  summary: string;
  subtasks: SubtaskState[];
  reviewAgent: string | null;
  maxReviewRounds: number;
  /** 0 while the first build runs; n once a review asked for changes n times. */
  round: number;
  reviews: Review[];
  /** cancelled: the task was cancelled while the plan ran (failed: a subtask, the review or the task failed). */
  status: 'running' | 'reviewing' | 'completed' | 'failed' | 'cancelled';
}

/** A tool call of an agent that the agent is waiting on. */
export interface OpenToolUse {
  toolUseId: string;
  name: string;
  input: Record<string, unknown>;
  /** pending: nothing decided yet; waiting: on a person or a subagent; resolved: result known. */
  state: 'pending' | 'awaiting_approval' | 'awaiting_answer' | 'dispatched' | 'resolved';
  result: ToolResult | null;
  /** Set once an approval granted the call (with the possibly edited input). */
  approvedInput: Record<string, unknown> | null;
}

export interface LeadState extends AgentLoopState {
  agentId: string;
  type: string;
  configVersion: string;
}

export const newLoop = (): AgentLoopState => ({ turns: 0, phase: 'model', openToolUses: [], finalText: null });

/** The loop state of any agent of the task: the lead's or a subagent's (undefined: no such agent). */
export function loopOf(s: TaskState, agentId: string): AgentLoopState | undefined {
  return s.lead && s.lead.agentId === agentId ? s.lead : s.agents[agentId];
}

/** The kinds of request a person answers. */
export const REQUEST_KINDS = ['approval', 'clarification', 'budget'] as const satisfies readonly PendingRequest['kind'][];

export type PendingRequest =
  | {
      kind: 'approval';
      requestId: string;
      agentId: string;
      toolUseId: string;
      toolName: string;
      input: Record<string, unknown>;
      /** sha256 of the canonical input: what an approver signs off on. */
      inputDigest: string;
      plan: string;
      deadline: string;
      /** What happens at the deadline if nobody decides. */
      onTimeout: 'reject' | 'approve';
      openedAt: string;
    }
  | {
      kind: 'clarification';
      requestId: string;
      agentId: string;
      toolUseId: string;
      questions: string[];
      context: string;
      options?: string[] | undefined;
      deadline?: string | undefined;
      openedAt: string;
    }
  | {
      kind: 'budget';
      requestId: string;
      /** The agent that found the budget reached. */
      agentId: string;
      spent: Spent;
      limit: Budget;
      deadline: string;
      /** At the deadline, nobody having decided, the run stops. */
      onTimeout: 'stop';
      openedAt: string;
    };

/**
 * A request that is no longer open, with what it resolved to, so that the agent that asked
 * can resume from the state alone: run the tool with `approvedInput`, or take `result` as
 * the tool result.
 */
/** Who a deadline's decision is by, in the log (`decidedBy`) and in `DecidedRequest.by`. */
export const DEADLINE_ACTOR = 'baton:deadline';

export interface DecidedRequest {
  decision: string;
  at: string;
  /** Who decided (an actor as the log names it; `baton:deadline` when the deadline did). */
  by?: string | undefined;
  /** A clarification's answers, as given. */
  answers?: string[] | undefined;
  /** The Idempotency-Key the decision was sent with, if any. */
  key?: string | undefined;
  /** A budget request's new limit, as raised. */
  raisedTo?: { usd: number | null; tokens: number | null } | undefined;
  agentId?: string | undefined;
  toolUseId?: string | undefined;
  approvedInput?: Record<string, unknown> | undefined;
  result?: { content: string; isError: boolean } | undefined;
}

export interface Artifact {
  path: string;
  bytes: number;
  sha256: string;
  mediaType: string;
  agentId: string | null;
  /** Its permission bits as recorded (ArtifactStored.mode); absent: the input file's, or 0644 (`artifactMode`). */
  mode?: number;
}

/** A task file's permission bits: as its artifact recorded them, else the input file's (events from before modes were kept), else 0644. */
export const artifactMode = (recorded: number | undefined, input: number | undefined): number => recorded ?? input ?? 0o644;

export interface TaskState {
  /** `none` until TaskSubmitted has been folded. */
  status: TaskStatus | 'none';
  id: string;
  tenantId: string;
  prompt: string;
  team: string;
  /** The version of the team's configuration the task was accepted with (TaskSubmitted; null in older logs): the one its lead starts on. */
  acceptedConfigVersion: string | null;
  requirePlanApproval: boolean;
  approvalTimeoutSeconds: number;
  webhook: WebhookConfig | null;
  /** Who is mailed and when (docs/email.md); null: nobody. */
  notify: NotifyConfig | null;
  metadata: Record<string, unknown>;
  forkedFrom: { taskId: string; atVersion: number } | null;
  /** The files the task started from (null: an empty workspace). */
  workspace: InputWorkspace | null;
  createdAt: string;
  updatedAt: string;
  /** Version of the task stream `task-<taskId>`. */
  version: number;
  /** Global position of the last folded event. */
  lastPosition: bigint;
  lead: LeadState | null;
  agents: Record<string, AgentState>;
  pendingRequests: Record<string, PendingRequest>;
  decidedRequests: Record<string, DecidedRequest>;
  usage: UsageTotals;
  /** The spending limit in force (raised by a person's decision); null: none. */
  budget: Budget | null;
  artifacts: Artifact[];
  /**
   * Paths agents deleted (FileDeleted) and nothing stored again since, sorted: gone from the
   * task's tree — input files among them too, which `artifacts` cannot say.
   */
  deletedFiles: string[];
  /** Outbox mails the agents asked for (send_email), by email id. */
  emails: Record<string, EmailState>;
  /** The lead's plan (engineering teams), once recorded. */
  plan: PlanState | null;
  result: { summary: string; reportPath: string | null } | null;
  error: { code: string; message: string } | null;
  /** Who cancelled the task, why and when (null unless cancelled). */
  cancellation: { reason: string; requestedBy: string; at: string } | null;
}

export const emptyUsage = (): UsageTotals => ({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 });

export const initialState = (): TaskState => ({
  status: 'none',
  id: '',
  tenantId: '',
  prompt: '',
  team: '',
  acceptedConfigVersion: null,
  requirePlanApproval: true,
  approvalTimeoutSeconds: 600,
  webhook: null,
  notify: null,
  metadata: {},
  forkedFrom: null,
  workspace: null,
  createdAt: '',
  updatedAt: '',
  version: 0,
  lastPosition: 0n,
  lead: null,
  agents: {},
  pendingRequests: {},
  decidedRequests: {},
  usage: emptyUsage(),
  budget: null,
  artifacts: [],
  deletedFiles: [],
  emails: {},
  plan: null,
  result: null,
  error: null,
  cancellation: null,
});

export function addUsage(total: UsageTotals, u: Usage): UsageTotals {
  return {
    inputTokens: total.inputTokens + u.inputTokens,
    outputTokens: total.outputTokens + u.outputTokens,
    cacheReadTokens: total.cacheReadTokens + u.cacheReadTokens,
    cacheWriteTokens: total.cacheWriteTokens + u.cacheWriteTokens,
    costUsd: total.costUsd + u.costUsd,
  };
}

// Named status predicates — ask these rather than comparing strings.
export const isFinal = (s: TaskState): boolean => s.status === 'completed' || s.status === 'failed' || s.status === 'cancelled';
export const exists = (s: TaskState): boolean => s.status !== 'none';
export const hasOpenRequests = (s: TaskState): boolean => Object.keys(s.pendingRequests).length > 0;
export const isAgentActive = (a: Pick<AgentState, 'status'>): boolean => a.status === 'dispatched' || a.status === 'running';
export const activeAgents = (s: TaskState): AgentState[] => Object.values(s.agents).filter(isAgentActive);
/** The agent's loop can move now: a model turn is due, or every tool use it made has a result. */
export const loopCanMove = (l: AgentLoopState): boolean => l.phase === 'model' || (l.phase === 'tools' && l.openToolUses.every((t) => t.state === 'resolved'));
/** The lead is ready for a model turn (every tool use it made has a result). */
export const leadNeedsTurn = (s: TaskState): boolean => !isFinal(s) && s.lead !== null && loopCanMove(s.lead) && !budgetHeld(s);
/**
 * Work that no person holds: the lead has not started or must take a turn, or an agent is
 * dispatched or running. Such a task must make progress by itself; the watchdog looks at it
 * when it does not.
 */
export const hasMachineWork = (s: TaskState): boolean => exists(s) && !isFinal(s) && (s.lead === null || leadNeedsTurn(s) || activeAgents(s).length > 0);
/** The earliest deadline among open requests (what the orchestrator's deadline poller looks for). */
export function nextDeadline(s: TaskState): string | null {
  let min: string | null = null;
  for (const r of Object.values(s.pendingRequests)) {
    if (r.deadline && (min === null || Date.parse(r.deadline) < Date.parse(min))) min = r.deadline;
  }
  return min;
}
/** A budget request is open: no agent calls a model until a person decides. */
export const budgetHeld = (s: TaskState): boolean => Object.values(s.pendingRequests).some((r) => r.kind === 'budget');
export const canAcceptInput = (s: TaskState): boolean => exists(s) && !isFinal(s) && hasOpenRequests(s);

/**
 * Status while not final: `pending` before the lead starts; `awaiting_input` while requests
 * are open and nothing can run; `running` otherwise.
 */
export function deriveStatus(s: TaskState): TaskStatus {
  if (s.status === 'completed' || s.status === 'failed' || s.status === 'cancelled') return s.status;
  if (s.lead === null) return 'pending';
  if (hasOpenRequests(s) && activeAgents(s).length === 0 && !leadNeedsTurn(s)) return 'awaiting_input';
  return 'running';
}

/** A plan still being carried out (subtasks or the review may run). */
export const planIsRunning = (s: TaskState): boolean => s.plan !== null && (s.plan.status === 'running' || s.plan.status === 'reviewing');

export type LeadPhase = 'planning' | 'awaiting_approval' | 'delegating' | 'reviewing' | 'done' | 'failed' | 'cancelled';

/** Where the lead stands, as people see it: planning, awaiting approval, delegating, reviewing, done, failed or cancelled. */
export function leadPhase(s: TaskState): LeadPhase {
  if (s.status === 'completed') return 'done';
  if (s.status === 'failed' || s.status === 'cancelled') return s.status;
  const leadId = s.lead?.agentId;
  if (leadId && Object.values(s.pendingRequests).some((r) => r.kind === 'approval' && r.agentId === leadId)) return 'awaiting_approval';
  if (s.plan?.status === 'reviewing' || activeAgents(s).some((a) => a.role === 'review')) return 'reviewing';
  if (planIsRunning(s) || activeAgents(s).length > 0 || Object.values(s.agents).some((a) => a.status === 'paused')) return 'delegating';
  return 'planning';
}
