import { isToolUse, textOf, type ContentBlock, type ToolResult } from './content.ts';
import { isTaskStream, type RecordedEvent } from './events.ts';
import { briefSummary } from './text.ts';
import { reworkByLocks, startsRoundOfChanges, type ReviewIssue, type Rework } from './plan.ts';
import {
  addUsage,
  DEADLINE_ACTOR,
  deriveStatus,
  emptyUsage,
  initialState,
  loopOf,
  newLoop,
  type AgentLoopState,
  type AgentState,
  type DecidedRequest,
  type LeadState,
  type OpenToolUse,
  type PendingRequest,
  type PlanState,
  type SubtaskState,
  type TaskState,
} from './state.ts';

/**
 * The task's state is the fold of its events: `events.reduce(evolve, initialState())`.
 * Pure: no clock, no ids, no I/O. Each call returns a new state and shares what did not change.
 */
export function evolve(state: TaskState, event: RecordedEvent): TaskState {
  const at = event.recordedAt.toISOString();
  let s: TaskState = { ...state, updatedAt: at, lastPosition: event.position };
  if (isTaskStream(event.streamId)) s.version = event.version;

  switch (event.type) {
    case 'TaskSubmitted': {
      const d = event.data;
      s = {
        ...s,
        status: 'pending',
        id: event.taskId,
        tenantId: d.tenantId,
        prompt: d.prompt,
        team: d.team,
        requirePlanApproval: d.requirePlanApproval,
        approvalTimeoutSeconds: d.approvalTimeoutSeconds,
        webhook: d.webhook,
        notify: d.notify ?? null,
        metadata: d.metadata,
        forkedFrom: d.forkedFrom ?? null,
        acceptedConfigVersion: d.configVersion ?? null,
        workspace: d.workspace ?? null,
        budget: d.budget ?? null,
        createdAt: at,
      };
      break;
    }
    case 'TaskStarted':
      s.lead = { ...newLoop(), agentId: event.data.leadAgentId, type: event.data.leadAgentType, configVersion: event.data.configVersion };
      break;
    case 'ModelTurnRecorded': {
      const d = event.data;
      s.usage = addUsage(s.usage, d.usage);
      if (s.lead && d.agentId === s.lead.agentId) s.lead = afterTurn(s.lead, d);
      else s = updateAgent(s, d.agentId, (a) => ({ ...afterTurn(a, d), usage: addUsage(a.usage, d.usage), stalledAttempts: 0 }));
      break;
    }
    case 'ToolResultsRecorded': {
      const done = new Set(event.data.results.map((r) => r.toolUseId));
      const tests = event.data.results.findLast((r) => r.tests)?.tests;
      if (s.lead && event.data.agentId === s.lead.agentId) s.lead = afterResults(s.lead, done);
      else s = updateAgent(s, event.data.agentId, (a) => ({ ...afterResults(a, done), ...(tests ? { tests } : {}), stalledAttempts: 0 }));
      break;
    }
    case 'ModelUnavailable': {
      const d = event.data;
      s = updateLoop(s, d.agentId, (l) => ({ ...l, modelOutage: { since: l.modelOutage?.since ?? at, failures: (l.modelOutage?.failures ?? 0) + 1, error: d.error } }));
      break;
    }
    case 'AgentReminded':
      s = updateLoop(s, event.data.agentId, (l) => ({ ...l, phase: 'model', finalText: null, reminders: (l.reminders ?? 0) + 1 }));
      break;
    case 'SubagentDispatched': {
      const d = event.data;
      const agent: AgentState = {
        ...newLoop(),
        id: d.agentId,
        type: d.agentType,
        status: 'dispatched',
        toolUseId: d.toolUseId,
        prompt: d.prompt,
        attempt: 0,
        stalledAttempts: 0,
        handedBack: false,
        streamVersion: 0,
        filesCreated: [],
        filesModified: [],
        filesDeleted: [],
        summary: null,
        error: null,
        usage: emptyUsage(),
        role: d.role ?? 'delegation',
        subtaskId: d.subtaskId ?? null,
        fileLocks: d.fileLocks ?? null,
        round: d.round ?? 0,
        tests: null,
        heldByBudget: false,
      };
      s.agents = { ...s.agents, [d.agentId]: agent };
      if (s.lead) s = updateToolUse(s, s.lead.agentId, d.toolUseId, (t) => ({ ...t, state: 'dispatched' }));
      if (s.plan && agent.role === 'review') s.plan = { ...s.plan, status: 'reviewing' };
      if (s.plan && agent.subtaskId) s = updateSubtask(s, agent.subtaskId, (t) => ({ ...t, status: 'running', agentIds: [...t.agentIds, agent.id] }));
      break;
    }
    case 'SubagentStarted':
      // Recorded twice per attempt (the claim on the task stream, the fence on the agent's): only
      // the claim starts one. The fence changes nothing here (its stream's version moves, below):
      // what the task stream said in between stands — a cancel, a failure, a newer attempt.
      if (event.data.attempt > (s.agents[event.data.agentId]?.attempt ?? 0))
        s = updateAgent(s, event.data.agentId, (a) => ({ ...a, status: 'running', attempt: event.data.attempt, stalledAttempts: a.stalledAttempts + 1, handedBack: false }));
      break;
    case 'SubagentCompleted': {
      const d = event.data;
      s = updateAgent(s, d.agentId, (a) => ({
        ...a,
        status: 'completed',
        summary: d.summary,
        filesCreated: d.filesCreated,
        filesModified: d.filesModified,
        filesDeleted: d.filesDeleted ?? [],
        tests: d.tests ?? a.tests,
      }));
      const agent = s.agents[d.agentId];
      if (agent?.subtaskId) {
        s = updateSubtask(s, agent.subtaskId, (t) => ({
          ...t,
          status: d.success ? 'done' : 'failed',
          summary: d.summary,
          filesCreated: union(t.filesCreated, d.filesCreated),
          filesModified: union(t.filesModified, d.filesModified).filter((f) => !t.filesCreated.includes(f) && !d.filesCreated.includes(f)),
          // A file deleted in one round and written again in a later one is changed, not deleted.
          filesDeleted: union(t.filesDeleted, d.filesDeleted ?? []).filter((f) => !d.filesCreated.includes(f) && !d.filesModified.includes(f)),
          tests: d.tests ?? agent.tests ?? t.tests,
          rework: null,
        }));
        s = settlePlan(s);
      } else if (agent?.role === 'review') {
        s = settlePlan(s);
      } else if (agent && s.lead) {
        const content = JSON.stringify({ summary: briefSummary(d.summary), filesCreated: d.filesCreated, filesModified: d.filesModified, ...(d.filesDeleted?.length ? { filesDeleted: d.filesDeleted } : {}), success: d.success });
        s = resolveToolUse(s, s.lead.agentId, agent.toolUseId, { content, isError: !d.success });
      }
      break;
    }
    case 'SubagentFailed': {
      const d = event.data;
      s = updateAgent(s, d.agentId, (a) => ({ ...a, status: 'failed', error: { code: d.code, message: d.message } }));
      const agent = s.agents[d.agentId];
      if (agent?.subtaskId) {
        s = updateSubtask(s, agent.subtaskId, (t) => ({ ...t, status: 'failed', summary: `failed (${d.code}): ${d.message}` }));
        s = settlePlan(s);
      } else if (agent?.role === 'review') s = settlePlan(s);
      else if (agent && s.lead) s = resolveToolUse(s, s.lead.agentId, agent.toolUseId, { content: `subagent ${d.agentId} failed (${d.code}): ${d.message}`, isError: true });
      break;
    }
    case 'SubagentHandedBack':
      // The attempt's start counted it as lost until now: it was handed back instead (still running: the next attempt takes it up).
      s = updateAgent(s, event.data.agentId, (a) => (a.attempt === event.data.attempt && !a.handedBack ? { ...a, stalledAttempts: Math.max(0, a.stalledAttempts - 1), handedBack: true } : a));
      break;
    case 'SubagentPaused':
      s = updateAgent(s, event.data.agentId, (a) => (a.status === 'running' ? { ...a, status: 'paused', heldByBudget: true } : a));
      break;
    case 'BudgetExceeded': {
      const d = event.data;
      s = openRequest(s, { kind: 'budget', requestId: d.requestId, agentId: d.agentId, spent: d.spent, limit: d.limit, deadline: d.deadline, onTimeout: 'stop', openedAt: at });
      break;
    }
    case 'BudgetRaised': {
      const d = event.data;
      const limit = [d.limit.usd !== null ? `$${d.limit.usd}` : null, d.limit.tokens !== null ? `${d.limit.tokens} tokens` : null].filter(Boolean).join(', ');
      s = closeRequest(s, d.requestId, { decision: `raised to ${limit}`, at, by: d.decidedBy, key: d.idempotencyKey, raisedTo: d.limit });
      s.budget = d.limit;
      for (const id of d.resumes) s = updateAgent(s, id, (a) => (a.status === 'paused' && a.heldByBudget ? { ...a, status: 'dispatched', heldByBudget: false } : a));
      break;
    }
    case 'BudgetRefused':
      s = closeRequest(s, event.data.requestId, { decision: event.data.timedOut ? 'timed out (stopped)' : `stopped: ${event.data.reason}`, at, by: event.data.decidedBy, key: event.data.idempotencyKey });
      break;
    case 'ApprovalRequested': {
      const d = event.data;
      s = openRequest(s, { kind: 'approval', ...d, onTimeout: d.onTimeout ?? 'reject', openedAt: at });
      s = waitOn(s, d.agentId, d.toolUseId, 'awaiting_approval');
      break;
    }
    case 'ApprovalGranted': {
      const req = s.pendingRequests[event.data.requestId];
      const decision = event.data.edited ? 'approved with edits' : 'approved';
      s = closeRequest(s, event.data.requestId, { decision, at, by: event.data.decidedBy, key: event.data.idempotencyKey, approvedInput: event.data.input });
      if (req && req.kind !== 'budget') s = resumeWith(s, req.agentId, req.toolUseId, { approvedInput: event.data.input });
      break;
    }
    case 'ApprovalRejected':
    case 'ApprovalTimedOut': {
      const req = s.pendingRequests[event.data.requestId];
      if (event.type === 'ApprovalTimedOut' && event.data.action === 'approve' && req?.kind === 'approval') {
        s = closeRequest(s, event.data.requestId, { decision: 'timed out (approved)', at, by: DEADLINE_ACTOR, approvedInput: req.input });
        s = resumeWith(s, req.agentId, req.toolUseId, { approvedInput: req.input });
        break;
      }
      // A delegation or a plan is "the plan" (the lead's words for it); any other call is named.
      const what = req?.kind !== 'approval' || req.toolName === 'Task' || req.toolName === 'submit_plan' ? 'the plan' : `this call (${req.toolName})`;
      const result = { content: rejectionText(what, event.type === 'ApprovalRejected' ? event.data.reason : null), isError: false };
      const decision = event.type === 'ApprovalRejected' ? `rejected: ${event.data.reason}` : 'timed out (rejected)';
      s = closeRequest(s, event.data.requestId, event.type === 'ApprovalRejected' ? { decision, at, by: event.data.decidedBy, key: event.data.idempotencyKey, result } : { decision, at, by: DEADLINE_ACTOR, result });
      if (req && req.kind !== 'budget') s = resumeWith(s, req.agentId, req.toolUseId, { result });
      break;
    }
    case 'ClarificationRequested': {
      const d = event.data;
      s = openRequest(s, { kind: 'clarification', ...d, openedAt: at });
      s = waitOn(s, d.agentId, d.toolUseId, 'awaiting_answer');
      break;
    }
    case 'ClarificationAnswered':
    case 'ClarificationTimedOut': {
      const req = s.pendingRequests[event.data.requestId];
      const result =
        event.type === 'ClarificationAnswered'
          ? { content: formatAnswers(req?.kind === 'clarification' ? req.questions : [], event.data.answers), isError: false }
          : { content: 'The user did not answer before the deadline. Proceed with your best judgement and state the assumptions you make.', isError: false };
      s = closeRequest(s, event.data.requestId, event.type === 'ClarificationAnswered' ? { decision: 'answered', at, by: event.data.answeredBy, answers: event.data.answers, key: event.data.idempotencyKey, result } : { decision: 'timed out (unanswered)', at, by: DEADLINE_ACTOR, result });
      if (req && req.kind !== 'budget') s = resumeWith(s, req.agentId, req.toolUseId, { result });
      break;
    }
    case 'PlanRecorded': {
      const d = event.data;
      s.plan = {
        toolUseId: d.toolUseId,
        summary: d.summary,
        subtasks: d.subtasks.map((t): SubtaskState => ({ ...t, status: 'pending', agentIds: [], summary: null, filesCreated: [], filesModified: [], filesDeleted: [], tests: null, rework: null })),
        reviewAgent: d.reviewAgent,
        maxReviewRounds: d.maxReviewRounds,
        round: 0,
        reviews: [],
        status: 'running',
      };
      s = updateToolUse(s, d.agentId, d.toolUseId, (t) => ({ ...t, state: 'dispatched' }));
      break;
    }
    case 'ReviewRecorded': {
      const d = event.data;
      if (!s.plan) break;
      const review = { agentId: d.agentId, round: d.round, verdict: d.verdict, issues: d.issues, summary: d.summary, tests: s.agents[d.agentId]?.tests ?? null };
      let plan: PlanState = { ...s.plan, reviews: [...s.plan.reviews, review], status: 'running' };
      if (startsRoundOfChanges(plan, d.verdict)) plan = reworkRound(plan, d.issues, d.rework);
      s.plan = plan;
      break;
    }
    case 'ArtifactStored': {
      const d = event.data;
      s.artifacts = [...s.artifacts.filter((a) => a.path !== d.path), { path: d.path, bytes: d.bytes, sha256: d.sha256, mediaType: d.mediaType, agentId: d.agentId, ...(d.mode !== undefined ? { mode: d.mode } : {}) }];
      if (s.deletedFiles.includes(d.path)) s.deletedFiles = s.deletedFiles.filter((p) => p !== d.path);
      break;
    }
    case 'FileDeleted': {
      const d = event.data;
      s.artifacts = s.artifacts.filter((a) => a.path !== d.path);
      if (!s.deletedFiles.includes(d.path)) s.deletedFiles = [...s.deletedFiles, d.path].sort();
      break;
    }
    case 'EmailRequested': {
      const d = event.data;
      s.emails = {
        ...s.emails,
        [d.emailId]: { emailId: d.emailId, agentId: d.agentId, toolUseId: d.toolUseId, to: d.to, subject: d.subject, attachments: d.attachments.map((a) => a.path), status: 'queued', requestedAt: at, settledAt: null, messageId: null, refused: [], error: null },
      };
      break;
    }
    case 'EmailSent':
    case 'EmailFailed': {
      const email = s.emails[event.data.emailId];
      if (!email) break;
      const outcome = event.type === 'EmailSent' ? { status: 'sent' as const, messageId: event.data.messageId, refused: event.data.rejected } : { status: 'failed' as const, error: { code: event.data.code, message: event.data.message } };
      s.emails = { ...s.emails, [email.emailId]: { ...email, ...outcome, settledAt: at } };
      break;
    }
    case 'TaskCompleted':
      s.status = 'completed';
      s.result = { summary: event.data.summary, reportPath: event.data.reportPath };
      break;
    case 'TaskFailed':
      s.status = 'failed';
      s.error = { code: event.data.code, message: event.data.message };
      s = stopEverything(s, at);
      break;
    case 'TaskCancelled':
      s.status = 'cancelled';
      s.cancellation = { reason: event.data.reason, requestedBy: event.data.requestedBy, at };
      s = stopEverything(s, at);
      break;
    default: {
      const never: never = event;
      return never;
    }
  }
  // Agent-stream events move the agent's own stream version.
  if (!isTaskStream(event.streamId)) {
    const agentId = (event.data as { agentId?: string }).agentId;
    if (agentId) s = updateAgent(s, agentId, (a) => ({ ...a, streamVersion: event.version }));
  }
  s.status = deriveStatus(s);
  return s;
}

/** The one fold: the state after `events`, from the start or on top of `from`. */
export function fold(events: Iterable<RecordedEvent>, from: TaskState = initialState()): TaskState {
  let s = from;
  for (const e of events) s = evolve(s, e);
  return s;
}

function updateAgent(s: TaskState, agentId: string, f: (a: AgentState) => AgentState): TaskState {
  const a = s.agents[agentId];
  return a ? { ...s, agents: { ...s.agents, [agentId]: f(a) } } : s;
}

/** A change of an agent's loop state (`AgentLoopState`), to the lead or the subagent it names. */
function updateLoop(s: TaskState, agentId: string, f: <L extends AgentLoopState>(l: L) => L): TaskState {
  return s.lead && agentId === s.lead.agentId ? { ...s, lead: f(s.lead) } : updateAgent(s, agentId, f);
}

/** What the model is told of a tool call its answer was cut in (stop reason `max_tokens`): not run. */
export const CUT_OFF_TOOL_USE = 'not run: your answer was cut off at its max_tokens limit before this call was complete, so its input may be too; make the call again, smaller (a large file in parts)';

/**
 * The loop after a model turn (pure). Its tool uses are opened (phase tools) whatever the stop
 * reason says — a tool call is never dropped without an answer — except the last of an answer cut
 * at `max_tokens`, which is answered at once as not run (its input may be cut). `pause_turn` (a
 * server tool paused the turn): the model goes on (phase model, the turn sent back as it is). A
 * `refusal` ends the loop refused; otherwise its text is the final answer.
 */
function afterTurn<L extends AgentLoopState>(prev: L, d: { turn: number; content: ContentBlock[]; stopReason: string }): L {
  // A turn ends whatever model outage the agent was in.
  const l: L = { ...prev };
  delete l.modelOutage;
  const toolUses = d.content.filter(isToolUse);
  if (toolUses.length > 0 && d.stopReason !== 'refusal' && d.stopReason !== 'pause_turn') {
    const cut = d.stopReason === 'max_tokens' ? toolUses.at(-1)?.id : undefined;
    const openToolUses = toolUses.map((t): OpenToolUse =>
      t.id === cut
        ? { toolUseId: t.id, name: t.name, input: t.input, state: 'resolved', result: { toolUseId: t.id, toolName: t.name, content: CUT_OFF_TOOL_USE, isError: true }, approvedInput: null }
        : { toolUseId: t.id, name: t.name, input: t.input, state: 'pending', result: null, approvedInput: null },
    );
    return { ...l, turns: d.turn, phase: 'tools', openToolUses };
  }
  if (d.stopReason === 'pause_turn') return { ...l, turns: d.turn, phase: 'model', openToolUses: [] };
  const text = textOf(d.content);
  if (d.stopReason === 'refusal') return { ...l, turns: d.turn, phase: 'done', openToolUses: [], finalText: text, refused: true };
  return { ...l, turns: d.turn, phase: 'done', openToolUses: [], finalText: d.stopReason === 'max_tokens' ? `${text}\n[cut off at the max_tokens limit]`.trimStart() : text };
}

/** The loop after tool results were recorded: those uses close; with none left a model turn is due. */
function afterResults<L extends AgentLoopState>(l: L, done: ReadonlySet<string>): L {
  const open = l.openToolUses.filter((t) => !done.has(t.toolUseId));
  return { ...l, openToolUses: open, phase: open.length === 0 && l.phase === 'tools' ? 'model' : l.phase };
}

function updateToolUse(s: TaskState, agentId: string, toolUseId: string, f: (t: OpenToolUse) => OpenToolUse): TaskState {
  const loop = loopOf(s, agentId);
  if (!loop) return s;
  const i = loop.openToolUses.findIndex((t) => t.toolUseId === toolUseId);
  if (i < 0) return s;
  const open = loop.openToolUses.slice();
  open[i] = f(open[i] as OpenToolUse);
  if (isLead(s, agentId)) return { ...s, lead: { ...(s.lead as LeadState), openToolUses: open } };
  return updateAgent(s, agentId, (a) => ({ ...a, openToolUses: open }));
}

function resolveToolUse(s: TaskState, agentId: string, toolUseId: string, r: { content: string; isError: boolean }): TaskState {
  return updateToolUse(s, agentId, toolUseId, (t) => {
    const result: ToolResult = { toolUseId, toolName: t.name, content: r.content, isError: r.isError };
    return { ...t, state: 'resolved', result };
  });
}

function openRequest(s: TaskState, req: PendingRequest): TaskState {
  return { ...s, pendingRequests: { ...s.pendingRequests, [req.requestId]: req } };
}

const isLead = (s: TaskState, agentId: string): boolean => s.lead !== null && s.lead.agentId === agentId;

/** A request opened: the asker's tool use waits on it; a subagent also pauses (holding nothing). */
function waitOn(s: TaskState, agentId: string, toolUseId: string, state: 'awaiting_approval' | 'awaiting_answer'): TaskState {
  s = updateToolUse(s, agentId, toolUseId, (t) => ({ ...t, state }));
  if (isLead(s, agentId)) return s;
  return updateAgent(s, agentId, (a) => (a.status === 'running' || a.status === 'dispatched' ? { ...a, status: 'paused' } : a));
}

/**
 * A request resolved: the asker's tool use becomes runnable (approved, with the approved input)
 * or gets its result; a paused subagent is then due a new job.
 */
function resumeWith(s: TaskState, agentId: string, toolUseId: string, outcome: { approvedInput: Record<string, unknown> } | { result: { content: string; isError: boolean } }): TaskState {
  s =
    'approvedInput' in outcome
      ? updateToolUse(s, agentId, toolUseId, (t) => ({ ...t, state: 'pending', approvedInput: outcome.approvedInput }))
      : resolveToolUse(s, agentId, toolUseId, outcome.result);
  if (isLead(s, agentId)) return s;
  // A subagent that asked several things at once resumes when the last of them is resolved.
  if (Object.values(s.pendingRequests).some((r) => r.agentId === agentId)) return s;
  return updateAgent(s, agentId, (a) => (a.status === 'paused' ? { ...a, status: 'dispatched' } : a));
}

function closeRequest(s: TaskState, requestId: string, outcome: Omit<DecidedRequest, 'agentId' | 'toolUseId'>): TaskState {
  const req = s.pendingRequests[requestId];
  const { [requestId]: _closed, ...rest } = s.pendingRequests;
  const decided: DecidedRequest = { ...outcome, agentId: req?.agentId, toolUseId: toolUseOf(req) };
  return { ...s, pendingRequests: rest, decidedRequests: { ...s.decidedRequests, [requestId]: decided } };
}

/** The tool use a request is about (a budget request is about none). */
const toolUseOf = (r: PendingRequest | undefined): string | undefined => (r && r.kind !== 'budget' ? r.toolUseId : undefined);

/** The tool result an agent sees for answered questions: each question with its answer. */
export function formatAnswers(questions: readonly string[], answers: readonly string[]): string {
  if (questions.length === answers.length && questions.length > 0) return questions.map((q, i) => `Q: ${q}\nA: ${answers[i] ?? ''}`).join('\n\n');
  return answers.join('\n');
}

const union = (a: readonly string[], b: readonly string[]): string[] => [...new Set([...a, ...b])].sort();

function updateSubtask(s: TaskState, id: string, f: (t: SubtaskState) => SubtaskState): TaskState {
  if (!s.plan) return s;
  return { ...s, plan: { ...s.plan, subtasks: s.plan.subtasks.map((t) => (t.id === id ? f(t) : t)) } };
}

/**
 * A review asked for changes with rounds left: the subtasks it gives issues to go back to pending
 * with them — as the review recorded (`rework`, decided by `reworkFor`), or, for a review
 * recorded before that was, as the fold routed them then: each issue to every subtask whose
 * locks hold its file; issues about no file (or a file nobody owns) to every subtask that
 * changed files.
 */
function reworkRound(plan: PlanState, issues: readonly ReviewIssue[], rework: Rework | undefined): PlanState {
  const assigned = new Map<string, ReviewIssue[]>();
  for (const r of rework ?? reworkByLocks(plan.subtasks, issues)) assigned.set(r.subtaskId, r.issues.flatMap((i) => (issues[i] ? [issues[i]] : [])));
  return {
    ...plan,
    round: plan.round + 1,
    subtasks: plan.subtasks.map((t) => (assigned.has(t.id) ? { ...t, status: 'pending', rework: assigned.get(t.id) ?? [] } : t)),
  };
}

/**
 * After a plan agent finished: skip what a failure blocks, and when nothing is left to run,
 * close the plan — completed, or failed — and give the lead its result (the outcome of every
 * subtask and the review), so its loop moves on. Whatever is still to dispatch (ready subtasks,
 * the review) is the scheduler's.
 */
function settlePlan(s: TaskState): TaskState {
  const plan = s.plan;
  if (!plan || (plan.status !== 'running' && plan.status !== 'reviewing')) return s;
  const failed = new Set(plan.subtasks.filter((t) => t.status === 'failed').map((t) => t.id));
  const subtasks = plan.subtasks.slice();
  for (let changedAny = true; changedAny; ) {
    changedAny = false;
    subtasks.forEach((t, i) => {
      if (t.status === 'pending' && t.dependsOn.some((d) => failed.has(d))) {
        subtasks[i] = { ...t, status: 'skipped', summary: `skipped: depends on ${t.dependsOn.filter((d) => failed.has(d)).join(', ')}, which did not finish` };
        failed.add(t.id);
        changedAny = true;
      }
    });
  }
  let next: PlanState = { ...plan, subtasks };
  const planAgents = Object.values(s.agents).filter((a) => a.role !== 'delegation');
  const busy = planAgents.some((a) => a.status === 'dispatched' || a.status === 'running' || a.status === 'paused');
  const close = (status: 'completed' | 'failed', isError: boolean): TaskState => {
    next = { ...next, status };
    const outcome = planOutcome(next);
    const closed: TaskState = { ...s, plan: next };
    return s.lead ? resolveToolUse(closed, s.lead.agentId, plan.toolUseId, { content: JSON.stringify(outcome), isError }) : closed;
  };
  if (busy) return { ...s, plan: next };
  if (failed.size > 0 && !subtasks.some((t) => t.status === 'pending' || t.status === 'running')) return close('failed', true);
  if (subtasks.some((t) => t.status === 'pending')) return { ...s, plan: { ...next, status: 'running' } };
  if (next.reviewAgent && next.reviews.length < next.round + 1) {
    const reviewedThisRound = planAgents.some((a) => a.role === 'review' && a.round === next.round);
    if (reviewedThisRound) return close('failed', true); // the reviewer ended without a verdict
    return { ...s, plan: { ...next, status: 'running' } }; // the scheduler dispatches the review
  }
  return close('completed', false);
}

/** What the lead is told when its plan has run: each subtask's outcome and the final review. */
export function planOutcome(plan: PlanState): Record<string, unknown> {
  const review = plan.reviews.at(-1) ?? null;
  return {
    status: plan.status,
    subtasks: plan.subtasks.map((t) => ({ id: t.id, agent: t.agent, status: t.status, summary: t.summary, filesCreated: t.filesCreated, filesModified: t.filesModified, ...(t.filesDeleted.length > 0 ? { filesDeleted: t.filesDeleted } : {}), tests: t.tests })),
    review: review ? { verdict: review.verdict, summary: review.summary, issues: review.issues, rounds: plan.round } : null,
  };
}

/** A final task holds nothing open: requests are closed and active agents stop. */
function stopEverything(s: TaskState, at: string): TaskState {
  const decided = { ...s.decidedRequests };
  for (const [id, r] of Object.entries(s.pendingRequests)) decided[id] = { decision: `closed: task ${s.status}`, at, agentId: r.agentId, toolUseId: toolUseOf(r) };
  const agents: Record<string, AgentState> = {};
  for (const [id, a] of Object.entries(s.agents)) {
    agents[id] = a.status === 'dispatched' || a.status === 'running' || a.status === 'paused' ? { ...a, status: 'cancelled' } : a;
  }
  const plan: PlanState | null = s.plan && (s.plan.status === 'running' || s.plan.status === 'reviewing')
    ? { ...s.plan, status: s.status === 'cancelled' ? 'cancelled' : 'failed', subtasks: s.plan.subtasks.map((t) => (t.status === 'pending' || t.status === 'running' ? { ...t, status: 'cancelled' } : t)) }
    : s.plan;
  return { ...s, pendingRequests: {}, decidedRequests: decided, agents, plan };
}

/**
 * What an agent reads when its call was not approved: a person's rejection with their reason, or
 * the deadline passing with nobody deciding (not told as a person's rejection: nobody is there
 * to answer a revised plan).
 */
export function rejectionText(what: string, reason: string | null): string {
  return reason === null ? `Nobody decided on ${what} before its deadline, so it was not approved (an undecided request is rejected then); no person is waiting to answer now.` : `The user rejected ${what}: ${reason}`;
}

/** A tool result that is a rejection (`rejectionText`): by a person (its reason after the colon), or by the deadline. */
export const REJECTION = /^(?:The user rejected|Nobody decided on) (?:the plan|this call)/;

