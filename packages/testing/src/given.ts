import {
  decide,
  evolve,
  initialState,
  recordAs,
  taskStreamId,
  type Command,
  type DecidedEvent,
  type RecordedEvent,
  type TaskState,
} from '@baton/domain';
import { expect } from 'vitest';

/**
 * Given/when/then for the task decider:
 *   given(events).when(command).then(expectedEvents)
 *   given(events).when(command).thenThrows(ErrorClass, /message/)
 */
export const TASK_ID = '00000000-0000-4000-8000-000000000001';

export function recorded(decided: readonly DecidedEvent[], opts: { taskId?: string; from?: number; streamId?: string } = {}): RecordedEvent[] {
  const taskId = opts.taskId ?? TASK_ID;
  let version = opts.from ?? 0;
  return decided.map((d) => {
    version++;
    const id = `00000000-0000-4000-8000-${String(version).padStart(12, '0')}`;
    return recordAs({ ...d, id }, { taskId, streamId: opts.streamId ?? taskStreamId(taskId), version, position: BigInt(version), recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, version)) });
  });
}

export function stateOf(events: readonly RecordedEvent[]): TaskState {
  return events.reduce(evolve, initialState());
}

export function given(history: readonly DecidedEvent[] | readonly RecordedEvent[]) {
  const events: RecordedEvent[] = history.length > 0 && 'streamId' in (history[0] as object) ? (history as RecordedEvent[]) : recorded(history as DecidedEvent[]);
  const state = stateOf(events);
  return {
    state,
    when(command: Command) {
      const run = () => decide(command, state);
      return {
        then(expected: readonly DecidedEvent[]): TaskState {
          const out = run();
          expect(out).toEqual(expected);
          return stateOf([...events, ...recorded(out, { from: state.version })]);
        },
        /** The state after whatever the command decides (no expectation on the events). */
        state(): TaskState {
          return stateOf([...events, ...recorded(run(), { from: state.version })]);
        },
        thenThrows(errorClass: new (...args: never[]) => Error, message?: RegExp): void {
          expect(run).toThrow(errorClass);
          if (message) expect(run).toThrow(message);
        },
      };
    },
  };
}
