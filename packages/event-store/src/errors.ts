/** Event-store errors. A version conflict is the one a command handler retries on. */
export class EventStoreError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export class ConcurrencyError extends EventStoreError {
  readonly streamId: string;
  readonly expectedVersion: number;
  readonly actualVersion: number | null;
  constructor(streamId: string, expectedVersion: number, actualVersion: number | null) {
    super(
      'concurrency_conflict',
      `stream ${streamId}: expected version ${expectedVersion}, but it is at ${actualVersion ?? 'a newer version (concurrent append)'}`,
    );
    this.streamId = streamId;
    this.expectedVersion = expectedVersion;
    this.actualVersion = actualVersion;
  }
}

export class DuplicateEventError extends EventStoreError {
  constructor(eventIds: string[]) {
    super('duplicate_event', `event id(s) ${eventIds.join(', ')} already recorded elsewhere in the log`);
  }
}

export const isConcurrencyError = (e: unknown): e is ConcurrencyError => e instanceof ConcurrencyError;
