import { randomUUID } from 'node:crypto';
import {
  agentStreamId,
  decide,
  evolve,
  initialState,
  taskStreamId,
  type Command,
  type DecidedEvent,
  type EventMetadata,
  type ForkedEvent,
  type NewEvent,
  type RecordedEvent,
  type TaskState,
} from '@baton/domain';
import { isConcurrencyError } from './errors.ts';
import { toTaskRow } from './task-row.ts';
import type { AppendResult, EventStore } from './store.ts';

export interface LoadedTask {
  state: TaskState;
  events: RecordedEvent[];
}

/** How a task is loaded: a full re-read (`loadTask`) or an incremental `TaskCache.load`. */
export type TaskLoader = (taskId: string) => Promise<LoadedTask>;

export interface WriteOptions {
  /** Event ids to use, in order (deterministic ids make a retried write a no-op). */
  eventIds?: readonly string[];
  metadata?: EventMetadata;
  now?: () => Date;
  newId?: () => string;
}

/** Load a task: every event of it, and the state folded from them. */
export async function loadTask(store: EventStore, taskId: string): Promise<LoadedTask> {
  const events = await store.readTask(taskId);
  let state = initialState();
  for (const e of events) state = evolve(state, e);
  return { state, events };
}

function materialise(decided: readonly DecidedEvent[], opts: WriteOptions): NewEvent[] {
  const newId = opts.newId ?? randomUUID;
  return decided.map((d, i) => ({
    id: opts.eventIds?.[i] ?? newId(),
    type: d.type,
    data: d.data,
    metadata: { ...opts.metadata, ...d.metadata },
  })) as NewEvent[];
}

/** Fold events that are about to be (or were just) appended, to know the state after them. */
function foldNew(state: TaskState, taskId: string, streamId: string, events: readonly NewEvent[], firstVersion: number, positions: readonly bigint[], at: Date): { state: TaskState; recorded: RecordedEvent[] } {
  let s = state;
  const recorded: RecordedEvent[] = [];
  events.forEach((e, i) => {
    const r = {
      id: e.id,
      type: e.type,
      taskId,
      streamId,
      version: firstVersion + i,
      position: positions[i] ?? s.lastPosition,
      recordedAt: at,
      data: e.data,
      metadata: e.metadata ?? {},
      schemaVersion: 1,
    } as RecordedEvent;
    recorded.push(r);
    s = evolve(s, r);
  });
  return { state: s, recorded };
}

export interface WriteResult {
  state: TaskState;
  events: RecordedEvent[];
  append: AppendResult;
}

/** Append decided events to the task stream at the state's version, with the read model in the same transaction. */
export async function appendToTask(store: EventStore, state: TaskState, taskId: string, decided: readonly DecidedEvent[], opts: WriteOptions = {}): Promise<WriteResult> {
  const streamId = taskStreamId(taskId);
  const events = materialise(decided, opts);
  const at = (opts.now ?? (() => new Date()))();
  const preview = foldNew(state, taskId, streamId, events, state.version + 1, [], at);
  const append = await store.append({
    streamId,
    taskId,
    expectedVersion: state.version,
    events,
    readModel: preview.state.status === 'none' ? undefined : toTaskRow(preview.state),
  });
  if (append.duplicate) {
    const reloaded = await loadTask(store, taskId);
    return { state: reloaded.state, events: [], append };
  }
  const after = foldNew(state, taskId, streamId, events, state.version + 1, append.positions, at);
  return { state: after.state, events: after.recorded, append };
}

/** Append decided events to one subagent's own stream, fenced by that stream's version. */
export async function appendToAgent(store: EventStore, state: TaskState, taskId: string, agentId: string, decided: readonly DecidedEvent[], opts: WriteOptions = {}): Promise<WriteResult> {
  const agent = state.agents[agentId];
  if (!agent) throw new Error(`appendToAgent: no agent '${agentId}' on task ${taskId}`);
  const streamId = agentStreamId(taskId, agentId);
  const events = materialise(decided, opts);
  const at = (opts.now ?? (() => new Date()))();
  const append = await store.append({ streamId, taskId, expectedVersion: agent.streamVersion, events });
  const after = foldNew(state, taskId, streamId, events, agent.streamVersion + 1, append.positions, at);
  return { state: after.state, events: after.recorded, append };
}

/**
 * Write a whole new task (a fork's copied history, several streams in log order) in one
 * statement, with its read model; returns the state folded from what was written.
 */
export async function importTask(store: EventStore, taskId: string, copied: readonly ForkedEvent[], opts: Pick<WriteOptions, 'now'> = {}): Promise<{ state: TaskState; events: RecordedEvent[] }> {
  const at = (opts.now ?? (() => new Date()))();
  const record = (positions: readonly bigint[]): RecordedEvent[] =>
    copied.map((c, i) => ({ ...c.event, taskId, streamId: c.streamId, version: c.version, position: positions[i] ?? BigInt(i + 1), recordedAt: at, metadata: c.event.metadata ?? {}, schemaVersion: 1 }) as RecordedEvent);
  const fold = (events: RecordedEvent[]): TaskState => events.reduce(evolve, initialState());
  const res = await store.importTask({ taskId, events: copied, readModel: toTaskRow(fold(record([]))) });
  if (res.duplicate) return loadTask(store, taskId);
  const events = record(res.positions);
  return { state: fold(events), events };
}

/**
 * Load → decide → append, retried on a version conflict only (decide is pure, so re-running
 * it on fresh state is safe). Domain errors and other failures surface at once.
 */
export async function handleCommand(
  store: EventStore,
  taskId: string,
  command: Command | readonly Command[] | ((state: TaskState) => Command | readonly Command[] | null),
  opts: WriteOptions & { maxAttempts?: number; load?: TaskLoader } = {},
): Promise<WriteResult> {
  const maxAttempts = opts.maxAttempts ?? 8;
  const load = opts.load ?? ((id: string) => loadTask(store, id));
  for (let attempt = 1; ; attempt++) {
    const { state } = await load(taskId);
    const cmd = typeof command === 'function' ? command(state) : command;
    if (cmd === null) return { state, events: [], append: { nextVersion: state.version, positions: [], duplicate: false } };
    // Several commands are decided against the same state and appended together (one commit):
    // for commands that do not depend on each other's effects, like artifacts and a completion.
    const decided = (Array.isArray(cmd) ? cmd : [cmd as Command]).flatMap((c) => decide(c, state));
    if (decided.length === 0) return { state, events: [], append: { nextVersion: state.version, positions: [], duplicate: false } };
    try {
      return await appendToTask(store, state, taskId, decided, opts);
    } catch (err) {
      if (!isConcurrencyError(err) || attempt >= maxAttempts) throw err;
    }
  }
}
