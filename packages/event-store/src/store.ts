import {
  CURRENT_SCHEMA_VERSION,
  isEventType,
  taskStreamId,
  upcast,
  type ForkedEvent,
  type RecordedEvent,
} from '@baton/domain';
import type { TaskRow } from './task-row.ts';
import type pg from 'pg';
import { inSpan, metrics, SpanKind } from '@baton/telemetry';
import { ConcurrencyError, DuplicateEventError } from './errors.ts';
import { appendImport, appendOne, type AppendInput } from './append.ts';
import { GroupCommitter } from './group-commit.ts';

/** A position in the log for readers that tail it: commit-safe order is (transaction_id, global_position). */
export interface LogCursor {
  txid: bigint;
  position: bigint;
}
export const START: LogCursor = { txid: 0n, position: 0n };
export const cursorToString = (c: LogCursor): string => `${c.txid}:${c.position}`;
/** `a` comes before `b` in commit-safe order. */
export const comesBefore = (a: LogCursor, b: LogCursor): boolean => a.txid < b.txid || (a.txid === b.txid && a.position < b.position);
export const sameCursor = (a: LogCursor, b: LogCursor): boolean => a.txid === b.txid && a.position === b.position;

export interface AppendResult {
  nextVersion: number;
  positions: bigint[];
  /** True when every event was already recorded (a retried append): nothing was written. */
  duplicate: boolean;
}

export { NOTIFY_CHANNEL, NOTIFY_PAYLOAD, type AppendInput } from './append.ts';

export const EVENT_COLUMNS = `global_position::text as gp, transaction_id::text as tx, stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata, recorded_at`;

/** An `events` row as selected with EVENT_COLUMNS. */
export interface EventRow {
  gp: string;
  tx: string;
  stream_id: string;
  stream_version: number;
  task_id: string;
  event_id: string;
  type: string;
  schema_version: number;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recorded_at: Date;
}

export function toRecorded(r: EventRow): RecordedEvent {
  if (!isEventType(r.type)) throw new Error(`unknown event type '${r.type}' at position ${r.gp}`);
  const data = r.schema_version === CURRENT_SCHEMA_VERSION ? r.data : upcast(r.type, r.schema_version, r.data);
  return {
    id: r.event_id,
    type: r.type,
    taskId: r.task_id,
    streamId: r.stream_id,
    version: r.stream_version,
    position: BigInt(r.gp),
    recordedAt: r.recorded_at,
    data,
    metadata: r.metadata,
    schemaVersion: r.schema_version,
  } as RecordedEvent;
}

export interface TailedEvent {
  event: RecordedEvent;
  cursor: LogCursor;
}

/** Queryable: a pg.Pool or a checked-out client (for readers that hold one session). */
type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

export interface EventStoreOptions {
  /** Write concurrent appends together (one statement, one commit). Default off; services turn it on. */
  groupCommit?: boolean | { maxBatch?: number; maxInFlight?: number };
}

export class EventStore {
  readonly pool: pg.Pool;
  readonly committer: GroupCommitter | null;
  constructor(pool: pg.Pool, opts: EventStoreOptions = {}) {
    this.pool = pool;
    this.committer = opts.groupCommit ? new GroupCommitter(pool, opts.groupCommit === true ? {} : opts.groupCommit) : null;
  }

  /**
   * Append events to one stream if it is at `expectedVersion`. A retried append (same event
   * ids) is a no-op that reports `duplicate`. A conflict throws ConcurrencyError.
   */
  async append(input: AppendInput): Promise<AppendResult> {
    const { streamId, expectedVersion, events } = input;
    if (events.length === 0) return { nextVersion: expectedVersion, positions: [], duplicate: false };
    const started = performance.now();
    const row = await inSpan(
      'baton.append',
      { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'postgresql', 'db.operation.name': 'append', 'baton.task_id': input.taskId, 'baton.stream_id': streamId, 'baton.events': events.length, 'baton.expected_version': expectedVersion } },
      () => (this.committer ? this.committer.submit(input) : appendOne(this.pool, input)),
    );
    metrics.appendSeconds.observe((performance.now() - started) / 1000);
    metrics.eventsAppended.inc(row.positions.length);
    if (row.positions.length === events.length) {
      return { nextVersion: expectedVersion + events.length, positions: row.positions, duplicate: false };
    }
    const ids = events.map((e) => e.id);
    if (row.positions.length === 0) return this.resolveDuplicate(streamId, expectedVersion, ids, row.currentVersion);
    throw new Error(`append to ${streamId}: ${row.positions.length} of ${events.length} events written (ids partly recorded before)`);
  }

  private async resolveDuplicate(streamId: string, expectedVersion: number, ids: string[], currentVersion: number): Promise<AppendResult> {
    const res = await this.pool.query<{ event_id: string; stream_id: string; stream_version: number; gp: string }>(
      'select event_id, stream_id, stream_version, global_position::text as gp from events where event_id = any($1::uuid[]) order by stream_version',
      [ids],
    );
    if (res.rows.length === ids.length && res.rows.every((r) => r.stream_id === streamId)) {
      const last = res.rows[res.rows.length - 1] as { stream_version: number };
      return { nextVersion: last.stream_version, positions: res.rows.map((r) => BigInt(r.gp)), duplicate: true };
    }
    if (res.rows.length > 0) throw new DuplicateEventError(res.rows.map((r) => r.event_id));
    throw new ConcurrencyError(streamId, expectedVersion, currentVersion >= 0 ? currentVersion : null);
  }

  /**
   * Write a whole new task at once (a fork): events of several streams, in the given order,
   * with the read model and NOTIFY, in one statement. Refused if the task already has events,
   * unless they are exactly these (a retried import is a no-op).
   */
  async importTask(input: { taskId: string; events: readonly ForkedEvent[]; readModel: TaskRow; recordedAt: Date }): Promise<{ positions: bigint[]; duplicate: boolean }> {
    const { taskId, events } = input;
    const row = await appendImport(this.pool, taskId, events, input.readModel, input.recordedAt);
    if (row.positions.length === events.length) return { positions: row.positions, duplicate: false };
    const first = events[0]?.event.id;
    const dup = first ? await this.pool.query('select 1 from events where event_id = $1 and task_id = $2', [first, taskId]) : { rowCount: 0 };
    if (dup.rowCount) return { positions: [], duplicate: true };
    throw new ConcurrencyError(taskStreamId(taskId), 0, row.currentVersion >= 0 ? row.currentVersion : null);
  }

  async readStream(streamId: string, afterVersion = 0, limit = 2_147_483_647): Promise<RecordedEvent[]> {
    const res = await this.pool.query<EventRow>({
      name: 'baton_read_stream',
      text: `select ${EVENT_COLUMNS} from events where stream_id = $1 and stream_version > $2 order by stream_version limit $3`,
      values: [streamId, afterVersion, limit],
    });
    return res.rows.map(toRecorded);
  }

  /** Every event of a task (all its streams) in log order: what its state is folded from. */
  async readTask(taskId: string): Promise<RecordedEvent[]> {
    const res = await this.pool.query<EventRow>({
      name: 'baton_read_task',
      text: `select ${EVENT_COLUMNS} from events where task_id = $1 order by global_position`,
      values: [taskId],
    });
    return res.rows.map(toRecorded);
  }

  /**
   * Tail the whole log after `cursor`, never skipping a row that a concurrent transaction
   * commits late: only rows whose transaction is older than every transaction still running
   * are visible, in (transaction_id, global_position) order.
   */
  async readAll(cursor: LogCursor, limit: number, db: Queryable = this.pool): Promise<TailedEvent[]> {
    return (await this.tail(cursor, limit, db)).events;
  }

  /**
   * `readAll` plus, in the same statement, whether rows after the cursor exist that the
   * horizon still hides (an older transaction is open): a tailer that got fewer than `limit`
   * rows and nothing hidden is caught up, with one query. `skipTypes`: event types the tailer
   * does not want (read past, never returned; the relay skips an agent's steps).
   */
  async tail(cursor: LogCursor, limit: number, db: Queryable = this.pool, skipTypes: readonly string[] = []): Promise<{ events: TailedEvent[]; hidden: boolean }> {
    const res = await db.query<EventRow & { hidden: boolean; gp: string | null }>({
      name: 'baton_tail_all',
      // hidden: is the newest row after the cursor at or above the horizon? (One backward index
      // probe, once per statement — materialized: inlined, it ran once per row returned. An exists
      // over every row after the cursor joined to the horizon was planned as a sequential scan of
      // the whole log, evaluating the snapshot for each row: milliseconds per tail, growing with the log.)
      text: `with c as materialized (select $1::text::xid8 as tx, $2::bigint as gp, pg_snapshot_xmin(pg_current_snapshot()) as xmin),
             h as materialized (select coalesce((select n.transaction_id >= c.xmin from events n
                                    where (n.transaction_id, n.global_position) > (c.tx, c.gp) and n.type <> all($4::text[])
                                    order by n.transaction_id desc, n.global_position desc limit 1), false) as hidden from c)
             select h.hidden, r.*
             from c cross join h left join lateral (
               select ${EVENT_COLUMNS} from events e
               where (e.transaction_id, e.global_position) > (c.tx, c.gp) and e.transaction_id < c.xmin and e.type <> all($4::text[])
               order by e.transaction_id, e.global_position limit $3
             ) r on true`,
      values: [cursor.txid.toString(), cursor.position.toString(), limit, skipTypes],
    });
    const hidden = res.rows[0]?.hidden ?? false;
    const events = res.rows.filter((r) => r.gp !== null).map((r) => ({ event: toRecorded(r), cursor: { txid: BigInt(r.tx), position: BigInt(r.gp as string) } }));
    return { events, hidden };
  }

  /**
   * A snapshot page of a task's committed events by position (read-your-writes; no horizon).
   * Use `readTaskAfter` to tail without ever skipping a late commit.
   */
  async readTaskPage(taskId: string, afterPosition: bigint, limit: number, skipTypes: readonly string[] = []): Promise<RecordedEvent[]> {
    const res = await this.pool.query<EventRow>({
      name: 'baton_read_task_page',
      text: `select ${EVENT_COLUMNS} from events where task_id = $1 and global_position > $2 and type <> all($4::text[]) order by global_position limit $3`,
      values: [taskId, afterPosition.toString(), limit, skipTypes],
    });
    return res.rows.map(toRecorded);
  }

  /**
   * The same gap-safe tail, for one task (SSE), and whether rows of the task after the cursor
   * are still hidden by the horizon (committed, but an older transaction is open): look again soon.
   */
  async readTaskAfter(taskId: string, cursor: LogCursor, limit: number, skipTypes: readonly string[] = []): Promise<{ events: TailedEvent[]; hidden: boolean }> {
    const res = await this.pool.query<EventRow & { hidden: boolean; gp: string | null }>({
      name: 'baton_read_task_after',
      // The horizon once per statement, and `hidden` once (materialized: inlined, it ran once per row
      // returned), by one backward probe of the task's index: is its newest row after the cursor at
      // or above the horizon? (An exists walked every row of the task after the cursor, per row
      // returned: a 20,000-event task took 16 s to stream from its start, quadratic in its length.)
      text: `with c as materialized (select $2::text::xid8 as tx, $3::bigint as gp, pg_snapshot_xmin(pg_current_snapshot()) as xmin),
             h as materialized (select coalesce((select n.transaction_id >= c.xmin from events n
                                    where n.task_id = $1 and (n.transaction_id, n.global_position) > (c.tx, c.gp) and n.type <> all($5::text[])
                                    order by n.transaction_id desc, n.global_position desc limit 1), false) as hidden from c)
             select h.hidden, r.*
             from c cross join h left join lateral (
               select ${EVENT_COLUMNS} from events e
               where e.task_id = $1 and (e.transaction_id, e.global_position) > (c.tx, c.gp) and e.transaction_id < c.xmin and e.type <> all($5::text[])
               order by e.transaction_id, e.global_position limit $4
             ) r on true`,
      values: [taskId, cursor.txid.toString(), cursor.position.toString(), limit, skipTypes],
    });
    const hidden = res.rows[0]?.hidden ?? false;
    const events = res.rows.filter((r) => r.gp !== null).map((r) => ({ event: toRecorded(r), cursor: { txid: BigInt(r.tx), position: BigInt(r.gp as string) } }));
    return { events, hidden };
  }

  /** Has the task's final event already been read by a tailer at `cursor` (commit order)? */
  async finalEventSent(taskId: string, cursor: LogCursor, finalTypes: readonly string[]): Promise<boolean> {
    const res = await this.pool.query<{ sent: boolean }>({
      name: 'baton_final_event_sent',
      text: `select (transaction_id, global_position) <= ($2::text::xid8, $3::bigint) as sent
               from events where task_id = $1 and stream_id = '${taskStreamId('')}' || $1::text and type = any($4::text[])`,
      values: [taskId, cursor.txid.toString(), cursor.position.toString(), finalTypes],
    });
    return res.rows[0]?.sent === true;
  }

  /** The tail cursor of a given event (for resuming from an SSE Last-Event-ID). */
  async cursorOf(taskId: string, position: bigint): Promise<LogCursor | null> {
    const res = await this.pool.query<{ tx: string }>(
      'select transaction_id::text as tx from events where task_id = $1 and global_position = $2',
      [taskId, position.toString()],
    );
    const tx = res.rows[0]?.tx;
    return tx === undefined ? null : { txid: BigInt(tx), position };
  }

  /**
   * A tail cursor just before the first event recorded at or after `since` (among the last
   * `scan` positions, so the look stays an index range), or null when there is none: where a
   * relay starts again to re-feed a bus that lost what it held.
   */
  async cursorBefore(since: Date, scan = 200_000): Promise<LogCursor | null> {
    const res = await this.pool.query<{ tx: string; gp: string }>(
      `select transaction_id::text as tx, global_position::text as gp from events
       where global_position > (select coalesce(max(global_position), 0) - $2 from events) and recorded_at >= $1
       order by transaction_id, global_position limit 1`,
      [since, scan],
    );
    const r = res.rows[0];
    return r ? { txid: BigInt(r.tx), position: BigInt(r.gp) - 1n } : null;
  }

  async loadCheckpoint(processorId: string, db: Queryable = this.pool): Promise<LogCursor> {
    const res = await db.query<{ tx: string; gp: string }>(
      'select transaction_id::text as tx, global_position::text as gp from processor_checkpoints where processor_id = $1',
      [processorId],
    );
    const r = res.rows[0];
    return r ? { txid: BigInt(r.tx), position: BigInt(r.gp) } : START;
  }

  async saveCheckpoint(processorId: string, cursor: LogCursor, db: Queryable = this.pool): Promise<void> {
    await db.query({
      name: 'baton_save_checkpoint',
      text: `insert into processor_checkpoints (processor_id, transaction_id, global_position, updated_at)
             values ($1, $2::text::xid8, $3, now())
             on conflict (processor_id) do update set transaction_id = excluded.transaction_id,
               global_position = excluded.global_position, updated_at = now()`,
      values: [processorId, cursor.txid.toString(), cursor.position.toString()],
    });
  }
}
