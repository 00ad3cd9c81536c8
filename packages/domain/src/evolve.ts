import { isToolUse, textOf, type ContentBlock, type ToolResult } from './content.ts';
import { isTaskStream, type RecordedEvent } from './events.ts';
import {
  addUsage,
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
        metadata: d.metadata,
        forkedFrom: d.forkedFrom ?? null,
        workspace: d.workspace ?? null,
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
      else s = updateAgent(s, d.agentId, (a) => ({ ...afterTurn(a, d), usage: addUsage(a.usage, d.usage) }));
      break;
    }
    case 'ToolResultsRecorded': {
      const done = new Set(event.data.results.map((r) => r.toolUseId));
      if (s.lead && event.data.agentId === s.lead.agentId) s.lead = afterResults(s.lead, done);
      else s = updateAgent(s, event.data.agentId, (a) => afterResults(a, done));
      break;
    }
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
        streamVersion: 0,
        filesCreated: [],
        filesModified: [],
        summary: null,
        error: null,
        usage: emptyUsage(),
      };
      s.agents = { ...s.agents, [d.agentId]: agent };
      if (s.lead) s = updateToolUse(s, s.lead.agentId, d.toolUseId, (t) => ({ ...t, state: 'dispatched' }));
      break;
    }
    case 'SubagentStarted':
      s = updateAgent(s, event.data.agentId, (a) => ({ ...a, status: 'running', attempt: event.data.attempt }));
      break;
    case 'SubagentCompleted': {
      const d = event.data;
      s = updateAgent(s, d.agentId, (a) => ({
        ...a,
        status: 'completed',
        summary: d.summary,
        filesCreated: d.filesCreated,
        filesModified: d.filesModified,
      }));
      const agent = s.agents[d.agentId];
      if (agent && s.lead) {
        const content = JSON.stringify({ summary: d.summary, filesCreated: d.filesCreated, filesModified: d.filesModified, success: d.success });
        s = resolveToolUse(s, s.lead.agentId, agent.toolUseId, { content, isError: !d.success });
      }
      break;
    }
    case 'SubagentFailed': {
      const d = event.data;
      s = updateAgent(s, d.agentId, (a) => ({ ...a, status: 'failed', error: { code: d.code, message: d.message } }));
      const agent = s.agents[d.agentId];
      if (agent && s.lead) s = resolveToolUse(s, s.lead.agentId, agent.toolUseId, { content: `subagent ${d.agentId} failed (${d.code}): ${d.message}`, isError: true });
      break;
    }
    case 'ApprovalRequested': {
      const d = event.data;
      s = openRequest(s, { kind: 'approval', ...d, onTimeout: d.onTimeout ?? 'reject', openedAt: at });
      s = waitOn(s, d.agentId, d.toolUseId, 'awaiting_approval');
      break;
    }
    case 'ApprovalGranted': {
      const req = s.pendingRequests[event.data.requestId];
      const decision = event.data.edited ? 'approved with edits' : 'approved';
      s = closeRequest(s, event.data.requestId, { decision, at, approvedInput: event.data.input });
      if (req) s = resumeWith(s, req.agentId, req.toolUseId, { approvedInput: event.data.input });
      break;
    }
    case 'ApprovalRejected':
    case 'ApprovalTimedOut': {
      const req = s.pendingRequests[event.data.requestId];
      if (event.type === 'ApprovalTimedOut' && event.data.action === 'approve' && req?.kind === 'approval') {
        s = closeRequest(s, event.data.requestId, { decision: 'timed out (approved)', at, approvedInput: req.input });
        s = resumeWith(s, req.agentId, req.toolUseId, { approvedInput: req.input });
        break;
      }
      const reason = event.type === 'ApprovalRejected' ? event.data.reason : 'no decision before the deadline';
      const result = { content: `The user rejected the plan: ${reason}`, isError: false };
      const decision = event.type === 'ApprovalRejected' ? `rejected: ${event.data.reason}` : 'timed out (rejected)';
      s = closeRequest(s, event.data.requestId, { decision, at, result });
      if (req) s = resumeWith(s, req.agentId, req.toolUseId, { result });
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
      s = closeRequest(s, event.data.requestId, { decision: event.type === 'ClarificationAnswered' ? 'answered' : 'timed out (unanswered)', at, result });
      if (req) s = resumeWith(s, req.agentId, req.toolUseId, { result });
      break;
    }
    case 'ArtifactStored': {
      const d = event.data;
      s.artifacts = [...s.artifacts.filter((a) => a.path !== d.path), { path: d.path, bytes: d.bytes, sha256: d.sha256, mediaType: d.mediaType, agentId: d.agentId }];
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

/** The loop after a model turn: its tool uses are open (phase tools), or it gave its final answer. */
function afterTurn<L extends AgentLoopState>(l: L, d: { turn: number; content: ContentBlock[]; stopReason: string }): L {
  const toolUses = d.content.filter(isToolUse);
  if (d.stopReason === 'tool_use' && toolUses.length > 0) {
    const openToolUses = toolUses.map((t): OpenToolUse => ({ toolUseId: t.id, name: t.name, input: t.input, state: 'pending', result: null, approvedInput: null }));
    return { ...l, turns: d.turn, phase: 'tools', openToolUses };
  }
  return { ...l, turns: d.turn, phase: 'done', openToolUses: [], finalText: textOf(d.content) };
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
  const decided: DecidedRequest = { ...outcome, agentId: req?.agentId, toolUseId: req?.toolUseId };
  return { ...s, pendingRequests: rest, decidedRequests: { ...s.decidedRequests, [requestId]: decided } };
}

/** The tool result an agent sees for answered questions: each question with its answer. */
export function formatAnswers(questions: readonly string[], answers: readonly string[]): string {
  if (questions.length === answers.length && questions.length > 0) return questions.map((q, i) => `Q: ${q}\nA: ${answers[i] ?? ''}`).join('\n\n');
  return answers.join('\n');
}

/** A final task holds nothing open: requests are closed and active agents stop. */
function stopEverything(s: TaskState, at: string): TaskState {
  const decided = { ...s.decidedRequests };
  for (const [id, r] of Object.entries(s.pendingRequests)) decided[id] = { decision: `closed: task ${s.status}`, at, agentId: r.agentId, toolUseId: r.toolUseId };
  const agents: Record<string, AgentState> = {};
  for (const [id, a] of Object.entries(s.agents)) {
    agents[id] = a.status === 'dispatched' || a.status === 'running' || a.status === 'paused' ? { ...a, status: 'cancelled' } : a;
  }
  return { ...s, pendingRequests: {}, decidedRequests: decided, agents };
}
