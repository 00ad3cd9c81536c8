import { randomUUID } from 'node:crypto';
import {
  decide,
  fold,
  isTaskStream,
  recordAs,
  streamOf,
  taskStreamId,
  type Command,
  type EventMetadata,
  type ForkedEvent,
  type NewEvent,
  type RecordedEvent,
  type TaskCommits,
  type TaskState,
} from '@baton/domain';
import { currentTraceCarrier } from '@baton/telemetry';
import { isConcurrencyError } from './errors.ts';
import { toTaskRow } from './task-row.ts';
import type { EventStore } from './store.ts';

export interface LoadedTask {
  state: TaskState;
  readonly events: readonly RecordedEvent[];
}

/** How a task is loaded: a full re-read (`loadTask`) or an incremental `TaskCache.load`. */
export type TaskLoader = (taskId: string) => Promise<LoadedTask>;

export interface WriteOptions {
  /** Metadata on every event written (an `apply` may add its own). */
  metadata?: EventMetadata;
  now?: () => Date;
  newId?: () => string;
}

/** Load a task: every event of it, and the state folded from them. */
export async function loadTask(store: EventStore, taskId: string): Promise<LoadedTask> {
  const events = await store.readTask(taskId);
  return { state: fold(events), events };
}

/**
 * Run `attempt` again while it fails on a version conflict, up to `maxAttempts` times: the one
 * retry loop. Each attempt must re-read what it decides on (decide is pure, so re-deciding on
 * fresh state is safe); any other error surfaces at once.
 */
export async function retryOnConflict<T>(attempt: (n: number) => Promise<T>, opts: { maxAttempts?: number; onConflict?: (n: number, err: unknown) => void } = {}): Promise<T> {
  const max = opts.maxAttempts ?? 8;
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!isConcurrencyError(err) || n >= max) throw err;
      opts.onConflict?.(n, err);
    }
  }
}

interface PendingGroup {
  streamId: string;
  expectedVersion: number;
  /** The events as decided, each with the time it was decided at (the time it is recorded with). */
  recorded: RecordedEvent[];
}

/**
 * The one way events enter the log. A writer starts from a task's state; `apply` decides
 * commands on the current state (decide, then evolve: each event is folded exactly once, when
 * it is decided) and holds the events; `flush` appends them, one append per stream (a subagent's
 * own turns and results go to its stream, everything else to the task stream), each at the
 * version the writer read, with the `tasks` read model in the same statement. A version conflict
 * throws ConcurrencyError: the caller re-reads (see `retryOnConflict`).
 */
export class TaskWriter {
  private readonly store: EventStore;
  readonly taskId: string;
  private readonly opts: WriteOptions;
  private groups: PendingGroup[] = [];
  /** The state with everything applied (recorded or pending). */
  state: TaskState;
  /** The state as recorded in the log: without what is pending. */
  committed: TaskState;

  constructor(store: EventStore, taskId: string, state: TaskState, opts: WriteOptions = {}) {
    this.store = store;
    this.taskId = taskId;
    this.state = state;
    this.committed = state;
    this.opts = opts;
  }

  /** Events applied and not yet flushed, in order. */
  get pending(): RecordedEvent[] {
    return this.groups.flatMap((g) => g.recorded);
  }

  /**
   * Decide commands, one after the other, each on the state the previous ones left; returns the
   * events as they will be recorded. A domain error leaves nothing of this call applied.
   */
  apply(commands: Command | readonly Command[], o: { metadata?: EventMetadata; eventIds?: readonly string[] } = {}): RecordedEvent[] {
    const newId = this.opts.newId ?? randomUUID;
    const at = (this.opts.now ?? (() => new Date()))();
    let s = this.state;
    // Traced work leaves its trace context on what it decides: the relay carries it on.
    const trace = currentTraceCarrier();
    const added: { group: string; expectedVersion: number; recorded: RecordedEvent }[] = [];
    for (const command of Array.isArray(commands) ? commands : [commands as Command]) {
      for (const d of decide(command, s)) {
        const event = { id: o.eventIds?.[added.length] ?? newId(), type: d.type, data: d.data, metadata: { ...trace, ...this.opts.metadata, ...o.metadata, ...d.metadata } } as NewEvent;
        const streamId = streamOf(this.taskId, event, s.lead?.agentId ?? null, command.type === 'ClaimAgentStream');
        const current = isTaskStream(streamId) ? s.version : (s.agents[(d.data as { agentId: string }).agentId]?.streamVersion ?? 0);
        const recorded = recordAs(event, { taskId: this.taskId, streamId, version: current + 1, position: s.lastPosition, recordedAt: at });
        s = fold([recorded], s);
        added.push({ group: streamId, expectedVersion: current, recorded });
      }
    }
    this.state = s;
    for (const a of added) {
      let g = this.groups.find((x) => x.streamId === a.group);
      if (!g) this.groups.push((g = { streamId: a.group, expectedVersion: a.expectedVersion, recorded: [] }));
      g.recorded.push(a.recorded);
    }
    return added.map((a) => a.recorded);
  }

  /**
   * Append what is pending (nothing to do: no statement). Returns the events as recorded, with
   * their positions. A retried append of the same events (same ids) is a no-op; the state is
   * then read again.
   */
  async flush(): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    while (this.groups.length > 0) {
      const g = this.groups[0] as PendingGroup;
      const append = await this.store.append({
        streamId: g.streamId,
        taskId: this.taskId,
        expectedVersion: g.expectedVersion,
        events: g.recorded,
        readModel: isTaskStream(g.streamId) && this.state.status !== 'none' ? toTaskRow(this.state) : undefined,
      });
      this.groups.shift();
      if (append.duplicate) {
        this.groups = [];
        this.state = this.committed = (await loadTask(this.store, this.taskId)).state;
        return out;
      }
      g.recorded.forEach((e, i) => out.push({ ...e, position: append.positions[i] ?? e.position }));
    }
    const last = out[out.length - 1];
    if (last && last.position > this.state.lastPosition) this.state = { ...this.state, lastPosition: last.position };
    this.committed = this.state;
    return out;
  }
}

export interface WriteResult {
  state: TaskState;
  readonly events: readonly RecordedEvent[];
}

/**
 * Load → decide → append, retried on a version conflict only. `command` may be a function of
 * the state (null: nothing to do); several commands are decided in order and appended together.
 */
export async function handleCommand(
  store: EventStore,
  taskId: string,
  command: Command | readonly Command[] | ((state: TaskState) => Command | readonly Command[] | null),
  opts: WriteOptions & { maxAttempts?: number; load?: TaskLoader; /** Event ids to use, in order (deterministic ids make a retried write a no-op). */ eventIds?: readonly string[] } = {},
): Promise<WriteResult> {
  const load = opts.load ?? ((id: string) => loadTask(store, id));
  return retryOnConflict(async () => {
    const { state } = await load(taskId);
    const cmd = typeof command === 'function' ? command(state) : command;
    if (cmd === null) return { state, events: [] };
    const w = new TaskWriter(store, taskId, state, opts);
    w.apply(cmd, opts.eventIds ? { eventIds: opts.eventIds } : {});
    const events = await w.flush();
    return { state: w.state, events };
  }, opts);
}

/**
 * Which commit recorded each event of a task's stream (`TaskCommits`, what `forkableVersions`
 * needs): the transaction that wrote it, or for an event a fork copied, the commit its source had.
 */
export async function taskCommits(store: Pick<EventStore, 'pool'>, taskId: string): Promise<TaskCommits> {
  const { rows } = await store.pool.query<{ v: number; c: string }>(`select stream_version as v, coalesce(metadata->>'copiedCommit', transaction_id::text) as c from events where stream_id = $1`, [taskStreamId(taskId)]);
  return new Map(rows.map((r) => [r.v, r.c]));
}

/**
 * Write a whole new task (a fork's copied history, several streams in log order) in one
 * statement, with its read model; returns the state folded from what was written.
 */
export async function importTask(store: EventStore, taskId: string, copied: readonly ForkedEvent[], opts: Pick<WriteOptions, 'now'> = {}): Promise<LoadedTask> {
  const recordedAt = (opts.now ?? (() => new Date()))();
  const record = (positions: readonly bigint[]): RecordedEvent[] =>
    copied.map((c, i) => recordAs(c.event, { taskId, streamId: c.streamId, version: c.version, position: positions[i] ?? BigInt(i + 1), recordedAt }));
  const preview = fold(record([]));
  const res = await store.importTask({ taskId, events: copied, readModel: toTaskRow(preview), recordedAt });
  if (res.duplicate) return loadTask(store, taskId);
  const events = record(res.positions);
  const last = events[events.length - 1];
  return { state: last ? { ...preview, lastPosition: last.position } : preview, events };
}

