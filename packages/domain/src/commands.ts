import type { EventData, EventMetadata, EventType } from './events.ts';

/**
 * Commands are requests to change a task, named in the imperative. `decide` turns a command
 * and the current state into events, or refuses with a typed error. Time and ids arrive in
 * the command (no clock inside the domain).
 */
export type Command =
  | ({ type: 'SubmitTask' } & EventData<'TaskSubmitted'>)
  | ({ type: 'StartTask' } & EventData<'TaskStarted'>)
  // A subagent's turns and results name the runner attempt that made them: a newer attempt fences them off.
  | ({ type: 'RecordModelTurn' } & EventData<'ModelTurnRecorded'> & AttemptFence)
  | ({ type: 'RecordToolResults' } & EventData<'ToolResultsRecorded'> & AttemptFence)
  | ({ type: 'RecordModelUnavailable' } & EventData<'ModelUnavailable'> & AttemptFence)
  /** An agent that gave its final answer without what its role needs is sent a reminder: a model turn is due again. */
  | ({ type: 'RemindAgent' } & EventData<'AgentReminded'> & AttemptFence)
  | ({ type: 'DispatchSubagent' } & EventData<'SubagentDispatched'>)
  | ({ type: 'StartSubagent' } & EventData<'SubagentStarted'>)
  /** The attempt just started takes the subagent's own stream (its version moves, so an older attempt's next write conflicts). */
  | ({ type: 'ClaimAgentStream' } & EventData<'SubagentStarted'>)
  /** A stopping runner aborted the attempt it ran: the attempt goes back, and does not count as lost (its attempt must be current). */
  | ({ type: 'HandBackSubagent' } & EventData<'SubagentHandedBack'>)
  | ({ type: 'CompleteSubagent' } & EventData<'SubagentCompleted'>)
  | ({ type: 'FailSubagent' } & EventData<'SubagentFailed'>)
  /** A subagent about to call its model found the budget held: it pauses (its attempt must be current). */
  | ({ type: 'PauseSubagent' } & EventData<'SubagentPaused'>)
  /** An agent about to call its model found the budget reached: the budget request opens (a no-op if one is open, or the budget was raised meanwhile). */
  | { type: 'ExceedBudget'; requestId: string; agentId: string; deadline: string }
  | ({ type: 'StoreArtifact' } & EventData<'ArtifactStored'>)
  | ({ type: 'DeleteFile' } & EventData<'FileDeleted'>)
  | ({ type: 'RecordPlan' } & EventData<'PlanRecorded'>)
  | ({ type: 'RecordReview' } & EventData<'ReviewRecorded'>)
  | ({ type: 'CompleteTask' } & EventData<'TaskCompleted'>)
  | ({ type: 'FailTask' } & EventData<'TaskFailed'>)
  | ({ type: 'CancelTask' } & EventData<'TaskCancelled'>)
  | ({ type: 'RequestApproval' } & EventData<'ApprovalRequested'>)
  | {
      type: 'DecideApproval';
      requestId: string;
      decision: 'approve' | 'reject';
      /** The edited tool input, already validated against the tool's schema by the caller. */
      input?: Record<string, unknown> | undefined;
      reason?: string | undefined;
      /** A budget request's new limit (measures not named keep theirs); required to approve one. */
      budget?: { usd?: number | undefined; tokens?: number | undefined } | undefined;
      decidedBy: string;
      /** The request's Idempotency-Key: sent again with it, the decision is answered as made (nothing recorded). */
      idempotencyKey?: string | undefined;
    }
  | { type: 'TimeOutApproval'; requestId: string }
  | { type: 'TimeOutClarification'; requestId: string }
  | ({ type: 'RequestClarification' } & EventData<'ClarificationRequested'>)
  | { type: 'AnswerClarification'; requestId: string; answers: string[]; answeredBy: string; idempotencyKey?: string | undefined }
  /** An agent's send_email call: the mail goes to the outbox (a no-op if this email was recorded already). */
  | ({ type: 'RequestEmail' } & EventData<'EmailRequested'>)
  /** The notifier's outcome of an outbox mail (a no-op once the email has one). */
  | ({ type: 'RecordEmailSent' } & EventData<'EmailSent'>)
  | ({ type: 'RecordEmailFailed' } & EventData<'EmailFailed'>);

export type CommandType = Command['type'];

/** The commands that record an agent's steps (STEP_EVENT_TYPES): a subagent's go to its own stream. */
export const isStepCommand = (c: Pick<Command, 'type'>): boolean =>
  c.type === 'RecordModelTurn' || c.type === 'RecordToolResults' || c.type === 'RecordModelUnavailable' || c.type === 'RemindAgent';

interface AttemptFence {
  /** The runner attempt writing (subagents); absent for the lead. */
  attempt?: number | undefined;
}

/** An event decided by `decide`, before the command handler gives it an id. */
export type DecidedEvent = { [T in EventType]: { type: T; data: EventData<T>; metadata?: EventMetadata } }[EventType];
