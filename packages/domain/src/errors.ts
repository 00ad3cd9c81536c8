import { DEADLINE_ACTOR } from './state.ts';

/**
 * Domain errors: a few classes, each with a stable `code` that the gateway maps to an HTTP
 * status in exactly one place. They are user faults (the command does not fit the state);
 * system faults are plain errors.
 */
/**
 * An error that says which it is: `name` is its class's, and a `cause` may be given. A failure a
 * service reports with a stable `code` extends it and declares only that code.
 */
export class NamedError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export type DomainErrorCode =
  | 'illegal_transition'
  | 'task_final'
  | 'request_not_found'
  | 'request_already_decided'
  | 'invalid_command'
  | 'idempotency_key_reused'
  | 'stale_attempt';

export class DomainError extends Error {
  readonly code: DomainErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: DomainErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** The command is not allowed in the task's current status. */
export class IllegalTransitionError extends DomainError {
  constructor(command: string, status: string, why?: string) {
    super('illegal_transition', `${command} is not allowed while the task is ${status}${why ? `: ${why}` : ''}`, { command, status });
  }
}

/** The task has completed, failed or been cancelled. */
export class TaskFinalError extends DomainError {
  constructor(command: string, status: string) {
    super('task_final', `${command} is not allowed: the task is already ${status}`, { command, status });
  }
}

export class RequestNotFoundError extends DomainError {
  constructor(requestId: string) {
    super('request_not_found', `no request '${requestId}' was opened on this task`, { requestId });
  }
}

/**
 * A request was decided already (two clicks, two replicas, another person): the first decision
 * stands. Says how, by whom and when, so a client that never saw its own answer can tell whether
 * the decision was its own.
 */
export class RequestAlreadyDecidedError extends DomainError {
  constructor(requestId: string, decided: { decision: string; by?: string | undefined; at: string }) {
    const who = decided.by === undefined ? '' : decided.by === DEADLINE_ACTOR ? 'by its deadline ' : `by ${decided.by} `;
    super('request_already_decided', `request '${requestId}' was already decided: ${decided.decision} (${who}at ${decided.at})`, {
      requestId,
      decision: decided.decision,
      decidedBy: decided.by ?? null,
      decidedAt: decided.at,
    });
  }
}

/** An Idempotency-Key sent again with another request than the one it was first used for. */
export class IdempotencyKeyReusedError extends DomainError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('idempotency_key_reused', message, details);
  }
}

export class InvalidCommandError extends DomainError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('invalid_command', message, details);
  }
}

/** A runner's attempt was superseded by a newer one (its job was taken over). */
export class StaleAttemptError extends DomainError {
  constructor(agentId: string, attempt: number, current: number) {
    super('stale_attempt', `attempt ${attempt} of agent '${agentId}' was superseded by attempt ${current}`, { agentId, attempt, current });
  }
}
