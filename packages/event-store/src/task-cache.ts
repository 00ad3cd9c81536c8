import { activeAgents, evolve, exists, initialState, isFinal, taskStreamId, type RecordedEvent, type TaskState } from '@baton/domain';
import { setBounded } from '@baton/runtime';
import pg from 'pg';
import { EVENT_COLUMNS, toRecorded, type EventRow } from './store.ts';
import type { LoadedTask } from './tasks.ts';

interface Entry {
  /** State folded from `events`, the cached part of the task. */
  state: TaskState;
  events: RecordedEvent[];
  /** Every event of the task that is not in `events` has transaction_id ≥ horizon. */
  horizon: bigint;
  /** Positions in `events` whose transaction_id is ≥ horizon (skipped when re-read). */
  skip: Set<string>;
  /** The task only waits (for a person): it counts against the waiting budget and goes first. */
  waiting: boolean;
  /**
   * The task as this process last knew it: the last load's whole result (the cached part and
   * the tail past it), or later — what it wrote since (`note`), the event that woke it (`advance`).
   * Its events start with `events`.
   */
  latest: LoadedTask;
  /** The estimated size of `events` (their data as JSON text, plus a fixed share per event). */
  absorbedBytes: number;
  /** The estimated size of `latest.events`, which the budget counts. */
  bytes: number;
}

/** What a set of cached tasks holds, and what it may hold. */
interface Tally {
  events: number;
  bytes: number;
  tasks: number;
}
const tally = (events = 0, bytes = 0, tasks = 0): Tally => ({ events, bytes, tasks });
/** Count an entry in (`sign` 1) or out (-1). */
function count(t: Tally, e: Entry, sign: 1 | -1): void {
  t.events += sign * e.latest.events.length;
  t.bytes += sign * e.bytes;
  t.tasks += sign;
}
const exceeds = (t: Tally, budget: Tally): boolean => t.events > budget.events || t.bytes > budget.bytes || t.tasks > budget.tasks;

/** What an event is counted as beyond its data: ids, type, positions, metadata, the object itself. */
const EVENT_OVERHEAD_BYTES = 256;
/** The length of the JSON text each jsonb value of a tail read was parsed from (kept by the parsed object). */
const textLength = new WeakMap<object, number>();
const JSONB_OID = 3802;
/**
 * The tail read's type parsers: pg's own, but a jsonb value's text length is kept as it is
 * parsed, so that sizing an event costs nothing (the text is there anyway).
 */
const tailTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid !== JSONB_OID || format === 'binary') return pg.types.getTypeParser(oid, format as 'text');
    return (text: string) => {
      const value = JSON.parse(text) as unknown;
      if (value !== null && typeof value === 'object') textLength.set(value, text.length);
      return value;
    };
  }) as typeof pg.types.getTypeParser,
};
/** Estimated sizes already worked out (an event stays in a task's views from load to load). */
const sizes = new WeakMap<RecordedEvent, number>();
/** An event's estimated size in the cache (its data's JSON text, as read; serialized once for upcast data and for events this process wrote). */
function sizeOf(e: RecordedEvent): number {
  let n = sizes.get(e);
  if (n === undefined) sizes.set(e, (n = (textLength.get(e.data as object) ?? JSON.stringify(e.data).length) + EVENT_OVERHEAD_BYTES));
  return n;
}
const sizeOfAll = (events: readonly RecordedEvent[], from: number): number => {
  let n = 0;
  for (let i = from; i < events.length; i++) n += sizeOf(events[i] as RecordedEvent);
  return n;
};

// One statement: the current horizon, and every event of the task at or above the cached one.
const TAIL_SQL = `
with s as (select pg_snapshot_xmin(pg_current_snapshot())::text as xmin)
select s.xmin, e.* from s left join lateral (
  select ${EVENT_COLUMNS}
  from events where task_id = $1 and transaction_id >= $2::text::xid8 order by global_position
) e on true`;

/** The horizon, and an event row — or nulls when the tail is empty. */
type TailRow = { xmin: string } & (EventRow | { [K in keyof EventRow]: null });

/**
 * Incremental task loading: a process keeps each task's folded state and reads only the
 * events it has not seen — usually none — instead of re-reading and re-folding the whole
 * task on every message. Gap-safe: the cached part holds exactly the events whose
 * transaction is older than the xmin horizon of the read that produced it, so every later
 * event (even one that commits late with a lower position) has transaction_id ≥ that horizon
 * and is in the next tail. The tail itself is read without a horizon, so a process always
 * sees its own writes. Bounded: least recently used tasks are dropped past `maxEvents`,
 * `maxBytes` (the events' estimated size) or `maxTasks`.
 */
export class TaskCache {
  private readonly entries = new Map<string, Entry>();
  /** Every cached task, and those that only wait, against their budgets. */
  private readonly all = tally();
  private readonly waitingOnes = tally();
  private readonly budget: Tally;
  private readonly waitingBudget: Tally;
  private readonly pool: Pick<pg.Pool, 'query'>;
  private readonly keep: (state: TaskState) => boolean;
  private readonly waiting: (state: TaskState) => boolean;
  hits = 0;
  misses = 0;
  /** Wake-ups applied to a known task without a read (`advance`). */
  advanced = 0;
  /** Tasks dropped because they were finished (the most recent MAX_FINISHED): an old first event of one is not a new task. */
  private readonly finished = new Map<string, true>();

  /**
   * `keep(state)` decides which tasks stay cached after a load (default: all). `waiting(state)`
   * marks tasks that only wait: together they hold at most `maxWaitingEvents` events,
   * `maxWaitingBytes` and `maxWaitingTasks` entries (default a quarter of each whole budget),
   * least recently used out first, so however many tasks wait (a watchdog pass loads them all)
   * the tasks at work keep the rest. `maxBytes` bounds the events' estimated size (their data's
   * JSON text: a few long model turns weigh more than thousands of short ones). As with events,
   * the task just loaded always stays, alone if it is over the budget, until the next load of
   * another task makes room. Services use `servicesCachePolicy`.
   */
  constructor(pool: Pick<pg.Pool, 'query'>, opts: { maxEvents?: number; maxTasks?: number; maxBytes?: number; maxWaitingEvents?: number; maxWaitingTasks?: number; maxWaitingBytes?: number; keep?: (state: TaskState) => boolean; waiting?: (state: TaskState) => boolean } = {}) {
    this.pool = pool;
    this.budget = tally(opts.maxEvents ?? 200_000, opts.maxBytes ?? 64 * 1024 * 1024, opts.maxTasks ?? 20_000);
    const quarter = (n: number) => Math.floor(n / 4);
    this.waitingBudget = tally(opts.maxWaitingEvents ?? quarter(this.budget.events), opts.maxWaitingBytes ?? quarter(this.budget.bytes), opts.maxWaitingTasks ?? quarter(this.budget.tasks));
    this.keep = opts.keep ?? (() => true);
    this.waiting = opts.waiting ?? (() => false);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The events of the cached tasks as last known (`latest`), which the budget counts. */
  get eventCount(): number {
    return this.all.events;
  }

  /** The estimated size in bytes of the events `eventCount` counts. */
  get byteCount(): number {
    return this.all.bytes;
  }

  readonly load = async (taskId: string): Promise<LoadedTask> => {
    const entry = this.entries.get(taskId);
    if (entry) this.hits++;
    else this.misses++;
    const res = await this.pool.query<TailRow>({ name: 'baton_task_tail', text: TAIL_SQL, values: [taskId, (entry?.horizon ?? 0n).toString()], types: tailTypes });
    const xmin = BigInt((res.rows[0] as TailRow).xmin);
    let state = entry?.state ?? initialState();
    const events = entry ? entry.events.slice() : [];
    // The cached part grows by the longest run of the tail (in log order) whose transactions
    // are all older than the new horizon: nothing can still commit before those.
    let absorbedState = state;
    let absorbed = events.length;
    let open = false;
    let lowestOpenTx = xmin;
    const skip = new Set<string>();
    for (const r of res.rows) {
      if (r.gp === null || entry?.skip.has(r.gp)) continue;
      const e = toRecorded(r);
      const tx = BigInt(r.tx);
      txOf.set(e, tx);
      events.push(e);
      state = evolve(state, e);
      if (!open && tx < xmin) {
        absorbedState = state;
        absorbed = events.length;
      } else {
        open = true;
        if (tx < lowestOpenTx) lowestOpenTx = tx;
      }
    }
    if (!this.keep(state)) {
      this.drop(taskId, state);
      return { state, events };
    }
    const kept = events.slice(0, absorbed);
    // Rows already absorbed at or above the new horizon are skipped when the next tail re-reads them.
    for (const e of kept) {
      const tx = txOf.get(e);
      if (tx !== undefined && tx >= lowestOpenTx) skip.add(e.position.toString());
    }
    const absorbedBytes = (entry?.absorbedBytes ?? 0) + sizeOfAll(kept, entry?.events.length ?? 0);
    const latest = { state, events };
    this.remember(taskId, { state: absorbedState, events: kept, horizon: lowestOpenTx, skip, waiting: this.waiting(state), latest, absorbedBytes, bytes: absorbedBytes + sizeOfAll(events, kept.length) });
    return latest;
  };

  /**
   * The task with the event that woke this process applied, without reading Postgres — when
   * what this process knows of the task is exactly one event behind: `woken` is the next event
   * of the task stream, and no subagent of the task is at work (its steps and its claim of an
   * attempt, in its own stream, are the only events outside the task stream, and an agent writes
   * them only while at work: dispatched or running; a paused one is resumed by a task-stream event).
   * Every other event of the task is then in the task stream, so a write decided on the result
   * is guarded completely by the task stream's expected version: it is as correct as one decided
   * on a read that raced the writes after `woken` (their own wake-ups follow). A task not
   * cached starts from its submission (not a fork's, whose history is written whole; not one
   * of a task this cache dropped as finished: a replayed old message) with nothing absorbed: its
   * next load reads it all, as a miss would. Null when that does not hold: load instead.
   */
  advance(taskId: string, woken: RecordedEvent): LoadedTask | null {
    const entry = this.entries.get(taskId);
    if (!entry && (woken.type !== 'TaskSubmitted' || woken.data.forkedFrom !== null || this.finished.has(taskId))) return null;
    const known = entry?.latest ?? { state: initialState(), events: [] };
    if (woken.taskId !== taskId || woken.streamId !== taskStreamId(taskId) || woken.version !== known.state.version + 1 || activeAgents(known.state).length > 0) return null;
    const next = { state: evolve(known.state, woken), events: [...known.events, woken] };
    this.advanced++;
    this.know(taskId, entry, next);
    return next;
  }

  /**
   * What this process knows of a task after writing to it: `seen` (what it decided on, and
   * what it appended), when that is newer than the last load or wake-up (`advance` then goes on
   * from it). Not kept: a view that does not extend the cached part (another load in between),
   * or whose state is not the fold of its events (its last task-stream event is not at the
   * state's version: a writer whose append turned out a duplicate re-reads the state alone).
   */
  note(taskId: string, seen: LoadedTask): void {
    const entry = this.entries.get(taskId);
    if (!entry || lastTaskStreamVersion(taskId, seen.events) !== seen.state.version) return;
    const known = entry.latest.state;
    const newer = seen.state.version > known.version || (seen.state.version === known.version && seen.events.length > entry.latest.events.length);
    const absorbed = entry.events.length;
    if (!newer || seen.events.length < absorbed || (absorbed > 0 && seen.events[absorbed - 1] !== entry.events[absorbed - 1])) return;
    this.know(taskId, entry, seen);
  }

  /** Keep `latest` as what is known of the task (entry created empty for a task not cached yet), or drop it when the policy would not keep it. */
  private know(taskId: string, entry: Entry | undefined, latest: LoadedTask): void {
    if (!this.keep(latest.state)) {
      this.drop(taskId, latest.state);
      return;
    }
    const base = entry ?? { state: initialState(), events: [], horizon: 0n, skip: new Set<string>(), absorbedBytes: 0 };
    const { state, events, horizon, skip, absorbedBytes } = base;
    this.remember(taskId, { state, events, horizon, skip, absorbedBytes, waiting: this.waiting(latest.state), latest, bytes: absorbedBytes + sizeOfAll(latest.events, events.length) });
  }

  /** Forget a task the policy does not keep, remembering it if it is finished. */
  private drop(taskId: string, state: TaskState): void {
    this.forget(taskId);
    if (isFinal(state)) setBounded(this.finished, taskId, true, MAX_FINISHED);
  }

  /**
   * A task this process heard has ended (its final event, heard on the bus: `onTaskEnds`):
   * dropped, and remembered as finished. A process that did not write or load the end itself
   * would otherwise hold it until the budget pushed it out (a runner kept every task a subagent
   * ran in, ~60 KB each; an orchestrator every task cancelled at the gateway).
   */
  ended(taskId: string): void {
    this.forget(taskId);
    setBounded(this.finished, taskId, true, MAX_FINISHED);
  }

  forget(taskId: string): void {
    const e = this.entries.get(taskId);
    if (!e) return;
    count(this.all, e, -1);
    if (e.waiting) count(this.waitingOnes, e, -1);
    this.entries.delete(taskId);
  }

  private remember(taskId: string, e: Entry): void {
    this.forget(taskId);
    this.entries.set(taskId, e);
    count(this.all, e, 1);
    if (e.waiting) count(this.waitingOnes, e, 1);
    // Waiting tasks over their budget go first, then anything over the whole budget.
    this.evict(taskId, () => exceeds(this.waitingOnes, this.waitingBudget), (other) => other.waiting);
    this.evict(taskId, () => exceeds(this.all, this.budget), () => true);
  }

  /** Drop the least recently used entries that `which` picks while `over()` holds; never `keepId` (the newest). */
  private evict(keepId: string, over: () => boolean, which: (e: Entry) => boolean): void {
    for (const [id, e] of this.entries) {
      if (!over() || id === keepId) break;
      if (which(e)) this.forget(id);
    }
  }
}

/** Keep unfinished tasks (running or waiting for a person); drop finished ones. */
export const keepUnfinished = (s: TaskState): boolean => exists(s) && !isFinal(s);

/**
 * The services' cache policy: unfinished tasks stay cached; those waiting for a person too, so
 * that the person's command and the step it wakes read only the new event, but within a budget
 * of their own (a quarter of the events, bytes and tasks), so that waiting tasks never push out
 * the ones at work.
 * A finished task is dropped on its next load in a process, and by every orchestrator and runner
 * as soon as they hear of its end (`TaskCache.ended`).
 */
export const servicesCachePolicy = { keep: keepUnfinished, waiting: (s: TaskState): boolean => s.status === 'awaiting_input' } as const;

/**
 * The gateway's: finished tasks stay too — people read them again and again (the report, the
 * files, the console's page; each read of one had read and folded its whole history again: a
 * second and more for a task of 50,000 events) — sharing the idle budget with the waiting
 * ones, so neither pushes out a task at work. A load still reads what came after (a mail's
 * outcome may follow the end).
 */
export const gatewayCachePolicy = { keep: exists, waiting: (s: TaskState): boolean => servicesCachePolicy.waiting(s) || isFinal(s) } as const;

/** How many finished tasks a cache remembers having dropped (`advance` does not start them again from an old first event). */
const MAX_FINISHED = 10_000;

/** The version of the last task-stream event in `events` (0: none). */
function lastTaskStreamVersion(taskId: string, events: readonly RecordedEvent[]): number {
  const stream = taskStreamId(taskId);
  return events.findLast((e) => e.streamId === stream)?.version ?? 0;
}

/** Transaction ids of cached events (kept beside them, not in the domain's event shape). */
const txOf = new WeakMap<RecordedEvent, bigint>();
