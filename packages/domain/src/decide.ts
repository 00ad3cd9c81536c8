import type { Command, DecidedEvent } from './commands.ts';
import {
  IllegalTransitionError,
  InvalidCommandError,
  RequestAlreadyDecidedError,
  RequestNotFoundError,
  StaleAttemptError,
  TaskFinalError,
} from './errors.ts';
import { activeAgents, exists, isFinal, type AgentState, type OpenToolUse, type TaskState } from './state.ts';

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
      const lead = requireLead(state, command.type);
      if (command.agentId === lead.agentId) {
        if (lead.phase !== 'model') throw new IllegalTransitionError(command.type, status, `the lead is not due a model turn (phase ${lead.phase})`);
        if (command.turn !== lead.turns + 1) throw new InvalidCommandError(`lead turn ${command.turn} does not follow turn ${lead.turns}`);
      } else {
        const agent = requireAgent(state, command.agentId);
        if (agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
        if (command.turn !== agent.turns + 1) throw new InvalidCommandError(`turn ${command.turn} of agent '${agent.id}' does not follow turn ${agent.turns}`);
      }
      return [{ type: 'ModelTurnRecorded', data: rest as DecidedData<'ModelTurnRecorded'> }];
    }

    case 'RecordToolResults': {
      mustBeLive();
      const lead = requireLead(state, command.type);
      if (command.results.length === 0) throw new InvalidCommandError('no tool results to record');
      if (command.agentId === lead.agentId) {
        const open = new Map(lead.openToolUses.map((t) => [t.toolUseId, t]));
        for (const r of command.results) {
          if (!open.has(r.toolUseId)) throw new InvalidCommandError(`tool use '${r.toolUseId}' is not open on the lead`, { toolUseId: r.toolUseId });
        }
      } else {
        const agent = requireAgent(state, command.agentId);
        if (agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      }
      return [{ type: 'ToolResultsRecorded', data: rest as DecidedData<'ToolResultsRecorded'> }];
    }

    case 'DispatchSubagent': {
      mustBeLive();
      const use = requireOpenToolUse(state, command.toolUseId, command.type);
      if (use.state !== 'pending') throw new IllegalTransitionError(command.type, status, `tool use '${use.toolUseId}' is ${use.state}`);
      if (state.agents[command.agentId]) throw new InvalidCommandError(`agent '${command.agentId}' already exists`, { agentId: command.agentId });
      return [{ type: 'SubagentDispatched', data: rest as DecidedData<'SubagentDispatched'> }];
    }

    case 'StartSubagent': {
      mustBeLive();
      const agent = requireAgent(state, command.agentId);
      if (agent.status !== 'dispatched' && agent.status !== 'running') throw new IllegalTransitionError(command.type, status, `agent '${agent.id}' is ${agent.status}`);
      if (command.attempt !== agent.attempt + 1) throw new StaleAttemptError(agent.id, command.attempt - 1, agent.attempt);
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

    case 'StoreArtifact':
      mustBeLive();
      if (command.agentId !== null) requireAgent(state, command.agentId);
      return [{ type: 'ArtifactStored', data: rest as DecidedData<'ArtifactStored'> }];

    case 'CompleteTask': {
      mustBeLive();
      const lead = requireLead(state, command.type);
      if (lead.phase !== 'done') throw new IllegalTransitionError(command.type, status, 'the lead has not given its final answer');
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
      const req = requireOpenRequest(state, command.requestId, command.type);
      if (req.kind !== 'approval') throw new InvalidCommandError(`request '${req.requestId}' is a ${req.kind}, not an approval`, { requestId: req.requestId });
      if (command.decision === 'approve') {
        const edited = command.input !== undefined;
        return [{ type: 'ApprovalGranted', data: { requestId: req.requestId, input: command.input ?? req.input, edited, decidedBy: command.decidedBy, agentId: req.agentId } }];
      }
      return [{ type: 'ApprovalRejected', data: { requestId: req.requestId, reason: command.reason ?? 'no reason given', decidedBy: command.decidedBy, agentId: req.agentId } }];
    }

    case 'TimeOutApproval':
    case 'TimeOutClarification': {
      // A deadline that fires after a decision is a no-op, not an error: the poller just moves on.
      const req = exists(state) && !isFinal(state) ? state.pendingRequests[command.requestId] : undefined;
      if (!req) return [];
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
      const req = requireOpenRequest(state, command.requestId, command.type);
      if (req.kind !== 'clarification') throw new InvalidCommandError(`request '${req.requestId}' is an ${req.kind}, not a clarification`, { requestId: req.requestId });
      return [{ type: 'ClarificationAnswered', data: { requestId: req.requestId, answers: command.answers, answeredBy: command.answeredBy, agentId: req.agentId } }];
    }

    default: {
      const never: never = command;
      return never;
    }
  }
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

function requireOpenToolUse(state: TaskState, toolUseId: string, command: string): OpenToolUse {
  const lead = requireLead(state, command);
  const use = lead.openToolUses.find((t) => t.toolUseId === toolUseId);
  if (!use) throw new InvalidCommandError(`tool use '${toolUseId}' is not open on the lead`, { toolUseId });
  return use;
}

function requireNewRequest(state: TaskState, requestId: string): void {
  if (state.pendingRequests[requestId] || state.decidedRequests[requestId]) {
    throw new InvalidCommandError(`request '${requestId}' already exists`, { requestId });
  }
}

/** The lead asks about one of its open tool uses; a subagent asks while it runs. */
function requireAsker(state: TaskState, agentId: string, toolUseId: string, command: string, checkLeadUse: (use: OpenToolUse) => void): void {
  const lead = requireLead(state, command);
  if (agentId === lead.agentId) {
    checkLeadUse(requireOpenToolUse(state, toolUseId, command));
    return;
  }
  const agent = requireAgent(state, agentId);
  // paused: the agent already asked something else in the same turn.
  if (agent.status !== 'running' && agent.status !== 'paused') throw new IllegalTransitionError(command, state.status, `agent '${agent.id}' is ${agent.status}`);
}

function requireOpenRequest(state: TaskState, requestId: string, command: string) {
  if (!exists(state)) throw new IllegalTransitionError(command, 'not submitted');
  const decided = state.decidedRequests[requestId];
  if (decided) throw new RequestAlreadyDecidedError(requestId, decided.decision);
  if (isFinal(state)) throw new TaskFinalError(command, state.status);
  const req = state.pendingRequests[requestId];
  if (!req) throw new RequestNotFoundError(requestId);
  return req;
}
