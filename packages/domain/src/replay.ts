import { evolve } from './evolve.ts';
import { isTaskStream, type RecordedEvent } from './events.ts';
import { initialState, type TaskState } from './state.ts';

/** The state after each event, in order: what `baton replay` prints. */
export function* replay(events: Iterable<RecordedEvent>): Generator<{ event: RecordedEvent; state: TaskState }> {
  let s = initialState();
  for (const event of events) {
    s = evolve(s, event);
    yield { event, state: s };
  }
}

/**
 * The state as it was right after version `atVersion` of the task stream: every event of the
 * task up to and including that task-stream event (agent-stream events recorded before it count).
 * Returns null when the task stream never reached that version.
 */
export function stateAt(events: Iterable<RecordedEvent>, atVersion: number): TaskState | null {
  let s = initialState();
  for (const event of events) {
    s = evolve(s, event);
    if (isTaskStream(event.streamId) && event.version === atVersion) return s;
  }
  return null;
}
