import type { Command, DecidedEvent } from './commands.ts';
import { canonicalJson, own } from './ids.ts';
import {
  IllegalTransitionError,
  IdempotencyKeyReusedError,
  InvalidCommandError,
  RequestAlreadyDecidedError,
  RequestNotFoundError,
  StaleAttemptError,
  TaskFinalError,
} from './errors.ts';
import { budgetReached, describeSpend, openBudgetRequest, raisedLimit, spentOf, type BudgetRequest } from './budget.ts';
import { overlappingLocks, planProblems, reworkFor, startsRoundOfChanges } from './plan.ts';
import { activeAgents, DEADLINE_ACTOR, exists, isFinal, loopOf, MAX_REMINDERS, planIsRunning, type AgentLoopState, type AgentState, type OpenToolUse, type TaskState } from './state.ts';

/**
 * decide(command, state) → the events that record it, or a typed error.
 * Pure: the same command on the same state always gives the same answer, which is what
 * lets a command handler retry safely after an optimistic-concurrency conflict.
 */
export function decide(command: Command, state: TaskState): DecidedEvent[] {
  const { type: _t, ...rest } = command;
  const status = state.status;
  const mustBeLive = (): void => {
    if (!exists(state)) throw new IllegalTransitionError(command.type, 'not submitted');
    if (isFinal(state)) throw new TaskFinalError(command.type, status);
  };

  switch (command.type) {
    case 'SubmitTask':
      if (exists(state)) throw new IllegalTransitionError(command.type, status, 'the task already exists');
      return [{ type: 'TaskSubmitted', data: rest as DecidedData<'TaskSubmitted'> }];

    case 'StartTask':
      mustBeLive();
      if (state.lead) throw new IllegalTransitionError(command.type, status, 'the lead has already started');
      return [{ type: 'TaskStarted', data: rest as DecidedData<'TaskStarted'> }];

    case 'RecordModelTurn': {
      mustBeLive();
      const { attempt: _a, ...data } = rest as typeof rest & { attempt?: number };
      const loop = requireModelDue(state, command);
      if (command.turn !== loop.turns + 1) throw new InvalidCommandError(`turn ${command.turn} of agent '${command.agentId}' does not follow turn ${loop.turns}`);
      return [{ type: 'ModelTurnRecorded', data: data as DecidedData<'ModelTurnRecorded'> }];
    }

    case 'RecordToolResults': {
      mustBeLive();
      const { attempt: _a, ...data } = rest as typeof rest & { attempt?: number };
      const loop = requireWriter(state, command.agentId, command.attempt, command.type);
      if (command.results.length === 0) throw new InvalidCommandError('no tool results to record');
      const open = new Set(loop.openToolUses.map((t) => t.toolUseId));
      for (const r of command.results) {
        if (!open.has(r.toolUseId)) throw new InvalidCommandError(`tool use '${r.toolUseId}' is not open on agent '${command.agentId}'`, { toolUseId: r.toolUseId });
      }
      return [{ type: 'ToolResultsRecorded', data: data as DecidedData<'ToolResultsRecorded'> }];
    }

    case 'RecordModelUnavailable': {
      mustBeLive();
      const { attempt: _a, ...data } = rest as typeof rest & { attempt?: number };
      requireModelDue(state, command);
      return [{ type: 'ModelUnavailable', data: data as DecidedData<'ModelUnavailable'> }];
    }

    case 'RemindAgent': {
      mustBeLive();
      const { attempt: _a, ...data } = rest as typeof rest & { attempt?: number };
      const loop = requireWriter(state, command.agentId, command.attempt, command.type);
      if (loop.phase !== 'done' || loop.refused) throw new IllegalTransitionError(command.type, status, `agent '${command.agentId}' has not given a final answer to be reminded after (phase ${loop.phase}${loop.refused ? ', refused' : ''})`);
      if ((loop.reminders ?? 0) >= MAX_REMINDERS) throw new IllegalTransitionError(command.type, status, `agent '${command.agentId}' was reminded already (at most ${MAX_REMINDERS})`);
      return [{ type: 'AgentReminded', data: data as DecidedData<'AgentReminded'> }];
    }

    case 'DispatchSubagent': {
      mustBeLive();
      const use = requireOpenToolUse(state, command.toolUseId, command.type);
      if (state.agents[command.agentId]) throw new InvalidCommandError(`agent '${command.agentId}' already exists`, { agentId: command.agentId });
      const role = command.role ?? 'delegation';
      if (role === 'delegation') {
        if (use.state !== 'pending') throw new IllegalTransitionError(command.type, status, `tool use '${use.toolUseId}' is ${use.state}`);
      } else requirePlanDispatch(state, command, role);
      return [{ type: 'SubagentDispatched', data: rest as DecidedData<'SubagentDispatched'> }];
    }

    case 'RecordPlan': {
      mustBeLive();
      const lead = requireLead(state, command.type);
      if (command.agentId !== lead.agentId) throw new InvalidCommandError('only the lead records a plan', { agentId: command.agentId });
      if (state.plan) throw new IllegalTransitionError(command.type, status, 'the task already has a plan');
      const use = requireOpenToolUse(state, command.toolUseId, command.type);
      if (use.state !== 'pending') throw new IllegalTransitionError(command.type, status, `tool use '${use.toolUseId}' is ${use.state}`);
      const problems = planProblems(command.subtasks, null);
      if (problems.length > 0) throw new InvalidCommandError(`invalid plan: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, { problems });
      return [{ type: 'PlanRecorded', data: rest as DecidedData<'PlanRecorded'> }];
    }

    case 'RecordReview': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.role !== 'review') throw new InvalidCommandError(`agent '${agent.id}' is not the plan's reviewer`, { agentId: agent.id });
      if (agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      if (!state.plan || state.plan.reviews.some((r) => r.round === command.round)) throw new IllegalTransitionError(command.type, status, `round ${command.round} was already reviewed`);
      if (command.round !== agent.round) throw new InvalidCommandError(`the reviewer of round ${agent.round} cannot record round ${command.round}`);
      if (command.verdict === 'request_changes' && command.issues.length === 0) throw new InvalidCommandError('a review that requests changes names at least one issue');
      // A round of changes to come: who addresses which issue is decided now, and recorded.
      const { rework: _given, ...review } = rest as DecidedData<'ReviewRecorded'>;
      const rework = startsRoundOfChanges(state.plan, command.verdict) ? reworkFor(state.plan.subtasks, command.issues) : null;
      return [{ type: 'ReviewRecorded', data: rework ? { ...review, rework } : review }];
    }

    case 'StartSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'dispatched' && agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      if (command.attempt !== agent.attempt + 1) throw new StaleAttemptError(agent.id, command.attempt - 1, agent.attempt);
      return [{ type: 'SubagentStarted', data: rest as DecidedData<'SubagentStarted'> }];
    }

    case 'ClaimAgentStream': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'running' || command.attempt !== agent.attempt) throw new StaleAttemptError(agent.id, command.attempt, agent.attempt);
      return [{ type: 'SubagentStarted', data: rest as DecidedData<'SubagentStarted'> }];
    }

    case 'CompleteSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      if (command.attempt !== agent.attempt) throw new StaleAttemptError(agent.id, command.attempt, agent.attempt);
      return [{ type: 'SubagentCompleted', data: rest as DecidedData<'SubagentCompleted'> }];
    }

    case 'FailSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (!['dispatched', 'running', 'paused'].includes(agent.status)) throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      return [{ type: 'SubagentFailed', data: rest as DecidedData<'SubagentFailed'> }];
    }

    case 'HandBackSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'running' || command.attempt !== agent.attempt) throw new StaleAttemptError(agent.id, command.attempt, agent.attempt);
      if (agent.handedBack) throw new IllegalTransitionError(command.type, status, `attempt ${agent.attempt} of agent '${agent.id}' was handed back already`);
      return [{ type: 'SubagentHandedBack', data: rest as DecidedData<'SubagentHandedBack'> }];
    }

    case 'PauseSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'running' || command.attempt !== agent.attempt) throw new StaleAttemptError(agent.id, command.attempt, agent.attempt);
      if (!openBudgetRequest(state)) throw new IllegalTransitionError(command.type, status, 'no budget request is open');
      return [{ type: 'SubagentPaused', data: rest as DecidedData<'SubagentPaused'> }];
    }

    case 'ExceedBudget': {
      mustBeLive();
      // Two agents finding it at once, or a raise that came first: nothing more to record.
      if (!state.budget || openBudgetRequest(state) || budgetReached(state).length === 0) return [];
      requireNewRequest(state, command.requestId);
      const data = { requestId: command.requestId, agentId: command.agentId, spent: spentOf(state), limit: state.budget, deadline: command.deadline, onTimeout: 'stop' as const };
      return [{ type: 'BudgetExceeded', data }];
    }

    case 'StoreArtifact':
      mustBeLive();
      if (command.agentId !== null) requireAgent(state, command.agentId);
      return [{ type: 'ArtifactStored', data: rest as DecidedData<'ArtifactStored'> }];

    case 'DeleteFile':
      mustBeLive();
      if (command.agentId !== null) requireAgent(state, command.agentId);
      return [{ type: 'FileDeleted', data: rest as DecidedData<'FileDeleted'> }];

    case 'CompleteTask': {
      mustBeLive();
      const lead = requireLead(state, command.type);
      if (command.leadCapped) {
        // A lead at its turn limit once its plan completed: the plan's outcome stands for its answer.
        if (lead.phase !== 'model' || state.plan?.status !== 'completed') throw new IllegalTransitionError(command.type, status, `a task completes without the lead's final answer only once its plan completed (plan ${state.plan?.status ?? 'none'}, lead phase ${lead.phase})`);
      } else if (lead.phase !== 'done') throw new IllegalTransitionError(command.type, status, 'the lead has not given its final answer');
      if (activeAgents(state).length > 0) throw new IllegalTransitionError(command.type, status, 'subagents are still running');
      return [{ type: 'TaskCompleted', data: rest as DecidedData<'TaskCompleted'> }];
    }

    case 'FailTask':
      mustBeLive();
      return [{ type: 'TaskFailed', data: rest as DecidedData<'TaskFailed'> }];

    case 'CancelTask':
      mustBeLive();
      return [{ type: 'TaskCancelled', data: rest as DecidedData<'TaskCancelled'> }];

    case 'RequestApproval': {
      mustBeLive();
      requireNewRequest(state, command.requestId);
      requireAsker(state, command.agentId, command.toolUseId, command.type, (use) => {
        if (use.state !== 'pending' || use.approvedInput) throw new IllegalTransitionError(command.type, status, `tool use '${use.toolUseId}' is ${use.state}`);
      });
      return [{ type: 'ApprovalRequested', data: rest as DecidedData<'ApprovalRequested'> }];
    }

    case 'DecideApproval': {
      if (repeatsDecision(state, command)) return [];
      const req = requireOpenRequest(state, command.requestId, command.type);
      if (req.kind === 'budget') return decideBudget(state, req, command);
      if (req.kind !== 'approval') throw new InvalidCommandError(`request '${req.requestId}' is a ${req.kind} request, not an approval`, { requestId: req.requestId });
      if (command.budget !== undefined) throw new InvalidCommandError(`budget goes with a budget request; '${req.requestId}' is an approval`, { requestId: req.requestId });
      if (command.decision === 'approve') {
        const edited = command.input !== undefined;
        return [{ type: 'ApprovalGranted', data: { requestId: req.requestId, input: command.input ?? req.input, edited, decidedBy: command.decidedBy, agentId: req.agentId, ...keyOf(command) } }];
      }
      return [{ type: 'ApprovalRejected', data: { requestId: req.requestId, reason: command.reason ?? 'no reason given', decidedBy: command.decidedBy, agentId: req.agentId, ...keyOf(command) } }];
    }

    case 'TimeOutApproval':
    case 'TimeOutClarification': {
      // A deadline that fires after a decision is a no-op, not an error: the poller just moves on.
      const req = exists(state) && !isFinal(state) ? own(state.pendingRequests, command.requestId) : undefined;
      if (!req) return [];
      if (req.kind === 'budget') return stopAtBudget(state, req, { reason: 'no decision before the deadline', decidedBy: DEADLINE_ACTOR, timedOut: true });
      if (req.kind === 'approval') return [{ type: 'ApprovalTimedOut', data: { requestId: req.requestId, action: req.onTimeout, agentId: req.agentId } }];
      return [{ type: 'ClarificationTimedOut', data: { requestId: req.requestId, agentId: req.agentId } }];
    }

    case 'RequestClarification': {
      mustBeLive();
      requireNewRequest(state, command.requestId);
      requireAsker(state, command.agentId, command.toolUseId, command.type, (use) => {
        if (use.state !== 'pending') throw new IllegalTransitionError(command.type, status, `tool use '${use.toolUseId}' is ${use.state}`);
      });
      return [{ type: 'ClarificationRequested', data: rest as DecidedData<'ClarificationRequested'> }];
    }

    case 'AnswerClarification': {
      if (repeatsDecision(state, command)) return [];
      const req = requireOpenRequest(state, command.requestId, command.type);
      if (req.kind !== 'clarification') throw new InvalidCommandError(`request '${req.requestId}' is ${req.kind === 'approval' ? 'an approval' : 'a budget request'}, not a clarification`, { requestId: req.requestId });
      // One answer per question, in order (the agent reads them as pairs), or one for them all.
      const asked = req.questions.length;
      if (command.answers.length > 1 && command.answers.length !== asked)
        throw new InvalidCommandError(`request '${req.requestId}' asks ${asked} question${asked === 1 ? '' : 's'}: give one answer per question, in order, or one answer for all (${command.answers.length} were given)`, { requestId: req.requestId });
      return [{ type: 'ClarificationAnswered', data: { requestId: req.requestId, answers: command.answers, answeredBy: command.answeredBy, agentId: req.agentId, ...keyOf(command) } }];
    }

    case 'RequestEmail': {
      mustBeLive();
      // The tool call run again (a resumed or retried job): recorded already, nothing more.
      if (state.emails[command.emailId]) return [];
      if (command.agentId !== state.lead?.agentId) {
        const agent = requireAgent(state, command.agentId);
        if (agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      }
      requireOpenToolUse(state, command.toolUseId, command.type, command.agentId);
      return [{ type: 'EmailRequested', data: rest as DecidedData<'EmailRequested'> }];
    }

    case 'RecordEmailSent':
    case 'RecordEmailFailed': {
      // The outcome of a mail asked for before; it may come after the task ended.
      if (!exists(state)) throw new IllegalTransitionError(command.type, 'not submitted');
      const email = state.emails[command.emailId];
      if (!email) throw new InvalidCommandError(`no email '${command.emailId}' on this task`, { emailId: command.emailId });
      if (email.status !== 'queued') return [];
      return command.type === 'RecordEmailSent' ? [{ type: 'EmailSent', data: rest as DecidedData<'EmailSent'> }] : [{ type: 'EmailFailed', data: rest as DecidedData<'EmailFailed'> }];
    }

    default: {
      const never: never = command;
      return never;
    }
  }
}

/** A person's decision on the budget: raise the limit (the run goes on) or stop the run. */
function decideBudget(state: TaskState, req: BudgetRequest, c: Extract<Command, { type: 'DecideApproval' }>): DecidedEvent[] {
  if (c.input !== undefined) throw new InvalidCommandError(`a budget request takes budget, not input`, { requestId: req.requestId });
  if (c.decision === 'reject') return stopAtBudget(state, req, { reason: c.reason ?? 'no reason given', decidedBy: c.decidedBy, timedOut: false, ...keyOf(c) });
  const raised = raisedLimit(state, c.budget);
  if (!raised.ok) throw new InvalidCommandError(raised.problem, { requestId: req.requestId });
  const resumes = Object.values(state.agents).filter((a) => a.heldByBudget && a.status === 'paused').map((a) => a.id);
  return [{ type: 'BudgetRaised', data: { requestId: req.requestId, limit: raised.limit, decidedBy: c.decidedBy, resumes, ...keyOf(c) } }];
}

function stopAtBudget(state: TaskState, req: BudgetRequest, o: { reason: string; decidedBy: string; timedOut: boolean; idempotencyKey?: string }): DecidedEvent[] {
  const spent = describeSpend(spentOf(state), state.budget ?? req.limit);
  const why = o.timedOut ? 'nobody decided before the deadline' : `stopped by ${o.decidedBy}: ${o.reason}`;
  return [
    { type: 'BudgetRefused', data: { requestId: req.requestId, ...o } },
    { type: 'TaskFailed', data: { code: 'budget_exceeded', message: `the task reached its budget (${spent}); ${why}` } },
  ];
}

type DecidedData<T extends DecidedEvent['type']> = Extract<DecidedEvent, { type: T }>['data'];

function requireLead(state: TaskState, command: string): NonNullable<TaskState['lead']> {
  if (!state.lead) throw new IllegalTransitionError(command, state.status, 'the lead has not started');
  return state.lead;
}

function requireAgent(state: TaskState, agentId: string): AgentState {
  const agent = state.agents[agentId];
  if (!agent) throw new InvalidCommandError(`no agent '${agentId}' on this task`, { agentId });
  return agent;
}

function requireOpenToolUse(state: TaskState, toolUseId: string, command: string, agentId: string = requireLead(state, command).agentId): OpenToolUse {
  const use = loopOf(state, agentId)?.openToolUses.find((t) => t.toolUseId === toolUseId);
  const who = state.lead?.agentId === agentId ? 'the lead' : `agent '${agentId}'`;
  if (!use) throw new InvalidCommandError(`tool use '${toolUseId}' is not open on ${who}`, { toolUseId });
  return use;
}

/**
 * The agent whose turn or tool results are being recorded: the lead, or a running subagent
 * (of the given attempt, when the writer names one).
 */
/** The loop of an agent whose model step (a turn, or a call the API could not answer) is being recorded: its writer (`requireWriter`), due a model turn. */
function requireModelDue(state: TaskState, command: { type: string; agentId: string; attempt?: number | undefined }): AgentLoopState {
  const loop = requireWriter(state, command.agentId, command.attempt, command.type);
  if (loop.phase !== 'model') throw new IllegalTransitionError(command.type, state.status, `agent '${command.agentId}' is not due a model turn (phase ${loop.phase})`);
  return loop;
}

function requireWriter(state: TaskState, agentId: string, attempt: number | undefined, command: string): AgentLoopState {
  const lead = requireLead(state, command);
  if (agentId === lead.agentId) return lead;
  const agent = requireAgent(state, agentId);
  if (agent.status !== 'running') throw new IllegalTransitionError(command, state.status, `agent '${agent.id}' is ${agent.status}`);
  if (attempt !== undefined && attempt !== agent.attempt) throw new StaleAttemptError(agent.id, attempt, agent.attempt);
  return agent;
}

/**
 * A dispatch the plan calls for: its subtask is pending (and its dependencies done, on the first
 * build), and no active agent holds a lock that overlaps its locks — or, for the review, every
 * subtask is done and this round has no reviewer yet.
 */
function requirePlanDispatch(state: TaskState, c: Extract<Command, { type: 'DispatchSubagent' }>, role: 'subtask' | 'review'): void {
  const plan = state.plan;
  if (!plan || !planIsRunning(state) || c.toolUseId !== plan.toolUseId) throw new IllegalTransitionError(c.type, state.status, 'no plan is running for that tool use');
  if ((c.round ?? 0) !== plan.round) throw new InvalidCommandError(`the plan is in round ${plan.round}, not ${c.round ?? 0}`);
  if (role === 'review') {
    if (plan.subtasks.some((t) => t.status !== 'done')) throw new IllegalTransitionError(c.type, state.status, 'the review waits until every subtask is done');
    if (Object.values(state.agents).some((a) => a.role === 'review' && a.round === plan.round)) throw new InvalidCommandError(`round ${plan.round} already has a reviewer`);
    return;
  }
  const t = plan.subtasks.find((x) => x.id === c.subtaskId);
  if (!t) throw new InvalidCommandError(`no subtask '${c.subtaskId ?? ''}' in the plan`, { subtaskId: c.subtaskId });
  if (t.status !== 'pending') throw new IllegalTransitionError(c.type, state.status, `subtask '${t.id}' is ${t.status}`);
  const waiting = t.dependsOn.filter((d) => plan.subtasks.find((x) => x.id === d)?.status !== 'done');
  if (waiting.length > 0) throw new IllegalTransitionError(c.type, state.status, `subtask '${t.id}' waits for ${waiting.join(', ')}`);
  const locks = c.fileLocks ?? t.fileLocks;
  for (const a of activeAgents(state)) {
    const clash = a.fileLocks ? overlappingLocks(locks, a.fileLocks) : null;
    if (clash) throw new IllegalTransitionError(c.type, state.status, `agent '${a.id}' holds '${clash[1]}', which overlaps '${clash[0]}'`);
  }
}

function requireNewRequest(state: TaskState, requestId: string): void {
  if (own(state.pendingRequests, requestId) || own(state.decidedRequests, requestId)) {
    throw new InvalidCommandError(`request '${requestId}' already exists`, { requestId });
  }
}

/** An agent asks about one of its open tool uses (a subagent while it runs). */
function requireAsker(state: TaskState, agentId: string, toolUseId: string, command: string, checkUse: (use: OpenToolUse) => void): void {
  const lead = requireLead(state, command);
  if (agentId !== lead.agentId) {
    const agent = requireAgent(state, agentId);
    // paused: the agent already asked something else in the same turn.
    if (agent.status !== 'running' && agent.status !== 'paused') throw new IllegalTransitionError(command, state.status, `agent '${agent.id}' is ${agent.status}`);
  }
  checkUse(requireOpenToolUse(state, toolUseId, command, agentId));
}

/**
 * A decision sent again under the Idempotency-Key it was recorded with (a client that never saw
 * its answer): nothing new to record, and no refusal — the retry succeeds as the first attempt
 * did. The same key with another decision is refused (idempotency_key_reused); without a key, or
 * with another, a decided request is refused naming how, by whom and when.
 */
function repeatsDecision(state: TaskState, c: Extract<Command, { type: 'DecideApproval' | 'AnswerClarification' }>): boolean {
  const d = own(state.decidedRequests, c.requestId);
  if (!c.idempotencyKey || d?.key !== c.idempotencyKey) return false;
  const reason = c.type === 'DecideApproval' ? (c.reason ?? 'no reason given') : '';
  const same =
    c.type === 'AnswerClarification'
      ? d.decision === 'answered' && canonicalJson(d.answers) === canonicalJson(c.answers)
      : c.decision === 'reject'
        ? d.decision === `rejected: ${reason}` || d.decision === `stopped: ${reason}`
        : c.budget !== undefined
          ? d.raisedTo !== undefined && (['usd', 'tokens'] as const).every((m) => c.budget?.[m] === undefined || c.budget[m] === d.raisedTo?.[m])
          : c.input === undefined
            ? d.decision === 'approved'
            : d.decision === 'approved with edits' && canonicalJson(c.input) === canonicalJson(d.approvedInput);
  if (!same) throw new IdempotencyKeyReusedError(`this Idempotency-Key was already used for another decision of request '${c.requestId}' (${d.decision})`, { requestId: c.requestId });
  return true;
}

/** A decision's Idempotency-Key for its event, when it was sent with one. */
const keyOf = (c: { idempotencyKey?: string | undefined }): { idempotencyKey?: string } => (c.idempotencyKey ? { idempotencyKey: c.idempotencyKey } : {});

function requireOpenRequest(state: TaskState, requestId: string, command: string) {
  if (!exists(state)) throw new IllegalTransitionError(command, 'not submitted');
  const decided = own(state.decidedRequests, requestId);
  if (decided) throw new RequestAlreadyDecidedError(requestId, decided);
  if (isFinal(state)) throw new TaskFinalError(command, state.status);
  const req = own(state.pendingRequests, requestId);
  if (!req) throw new RequestNotFoundError(requestId);
  return req;
}
