import { WATCH_SINCE_LAG_S } from '@baton/db';
import { CURRENT_SCHEMA_VERSION, STEP_EVENT_TYPES, taskStreamId, type ForkedEvent, type NewEvent } from '@baton/domain';
import type pg from 'pg';
import { ConcurrencyError } from './errors.ts';
import type { TaskRow } from './task-row.ts';

/**
 * The one write path into the log. A single append is a batch of one; a group commit is a
 * batch of many; a fork's import is a batch of one item that spans several streams. All send
 * the same statement, so they share the version guard, the idempotency check, the column
 * encoding, the read-model upsert and the NOTIFY.
 */

/** Step event types as an SQL list (constant names from the domain). An append of steps alone sends no NOTIFY: the relay does not carry them. */
const STEP_TYPES_SQL = STEP_EVENT_TYPES.map((t) => `'${t}'`).join(', ');

/** The NOTIFY channel an append signals on commit (the relay LISTENs) when it wrote a transition (not only steps). */
/** An escaped lone surrogate in JSON (`\ud83d` not preceded by an escaping backslash): JSON.stringify writes one only for half a character. */
const LONE_SURROGATE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;

/**
 * JSON Postgres takes: half a character (a lone surrogate, left by a cut through an emoji
 * somewhere) becomes U+FFFD instead of failing the whole append — Postgres refuses it in jsonb,
 * and a step that can never be recorded was retried until its run failed. Whole characters are
 * written as themselves, so only a string with half of one is touched (one test of the JSON
 * otherwise). Every write of the log's and the read models' JSON goes through here.
 */
export function storableJson(value: unknown): string {
  const json = JSON.stringify(value);
  LONE_SURROGATE.lastIndex = 0;
  return LONE_SURROGATE.test(json) ? json.replace(LONE_SURROGATE, '$1\\ufffd') : json;
}

export const NOTIFY_CHANNEL = 'baton_events';
/**
 * The NOTIFY payload: always empty. A notification only means "the log grew, tail it" (the
 * relay, the one listener, reads what changed from the log itself); one payload per commit
 * lets Postgres fold a batch's notifications into one.
 */
export const NOTIFY_PAYLOAD = '';

/** An event to append, with the time its writer recorded it at, if it has one. */
export type TimedEvent = NewEvent & { recordedAt?: Date };

export interface AppendInput {
  streamId: string;
  taskId: string;
  /** The version the caller read; 0 for a new stream. */
  expectedVersion: number;
  /**
   * The events, each with the time its writer decided it (and folded it with: recorded as is, so
   * the state a reader folds from the log is the writer's to the millisecond); none: the
   * database's clock at the append.
   */
  events: readonly TimedEvent[];
  /** The `tasks` read-model row after these events, written in the same transaction. */
  readModel?: TaskRow | undefined;
}

/** The outcome of one item: its positions, or the stream's current version when nothing was written. */
export interface BatchItemResult {
  currentVersion: number;
  positions: bigint[];
}

/**
 * How an append upserts the `tasks` read model: never moving it back to an older version.
 * `watch_since` is kept while the new value is at most WATCH_SINCE_LAG_S later (a lead's steps:
 * the row is then updated in place, no index touched); set, cleared or moved back (another
 * writer's clock) at once.
 */
const TASKS_UPSERT_CONFLICT = `on conflict (id) do update set
    status = excluded.status, team = excluded.team, title = excluded.title, updated_at = excluded.updated_at,
    version = excluded.version, pending_requests = excluded.pending_requests, next_deadline = excluded.next_deadline,
    watch_since = case when excluded.watch_since >= tasks.watch_since and excluded.watch_since < tasks.watch_since + interval '${WATCH_SINCE_LAG_S} second'
      then tasks.watch_since else excluded.watch_since end
  where tasks.version <= excluded.version`;

// Many items, one statement (one round trip, one implicit transaction). Each input row is an
// event with its item, stream and own version; the first row of each stream in an item also
// carries the stream's expected version (null on the others: no DISTINCT needed). An item is
// written whole or not at all: only if every stream it touches is at its expected version and
// none of its event ids is recorded yet. Items that write nothing report their stream's current
// version and are resolved by the caller. Rows are inserted in input order, so positions
// follow it (a fork keeps its source's log order across streams).
// `params` is materialized on purpose: the arrays then reach `unnest` as column values, not
// constants, so a custom plan estimates the same row counts as the generic one and Postgres
// settles on the generic plan of the prepared statement after five executions instead of
// re-planning this statement on every append (the hot path). That generic plan is kept for the
// connection's life, so it must not depend on how big the log was when it was made: the check
// for already-recorded event ids probes the unique index once per event (a lateral with a
// limit cannot become a hash join, which on a young log was planned as a scan of the whole log:
// an append that grew slower with every event; plans.int.test.ts).
const APPEND_SQL = `
with params as materialized (
  select $1::int[] as item, $2::text[] as stream_id, $3::uuid[] as task_id, $4::int[] as expected, $5::int[] as version,
         $6::uuid[] as event_id, $7::text[] as type, $8::jsonb[] as data, $9::jsonb[] as metadata, $10::timestamptz[] as recorded_at
), input as (
  select i.* from params p,
    unnest(p.item, p.stream_id, p.task_id, p.expected, p.version, p.event_id, p.type, p.data, p.metadata, p.recorded_at)
    with ordinality as i(item, stream_id, task_id, expected, version, event_id, type, data, metadata, recorded_at, seq)
), streams as (
  select item, stream_id, expected from input where expected is not null
), items as (
  select s.item, max(coalesce(g.v, 0)) as current,
         bool_and(coalesce(g.v, 0) = s.expected)
           and not exists (select 1 from input x cross join lateral (select 1 from events e where e.event_id = x.event_id limit 1) d where x.item = s.item) as ok
  from streams s
  left join lateral (select e.stream_version as v from events e where e.stream_id = s.stream_id order by e.stream_version desc limit 1) g on true
  group by s.item
), ins as (
  insert into events (stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata, recorded_at)
  select i.stream_id, i.version, i.task_id, i.event_id, i.type, $11::int, i.data, i.metadata, coalesce(i.recorded_at, now())
  from input i join items it on it.item = i.item
  where it.ok
  order by i.seq
  on conflict (event_id) do nothing
  returning stream_id, global_position, type
), proj as (
  insert into tasks
  select r.* from jsonb_populate_recordset(null::tasks, $12::jsonb) r
  where exists (select 1 from ins where ins.stream_id = '${taskStreamId('')}' || r.id::text)
  ${TASKS_UPSERT_CONFLICT}
  returning 1
), notified as (
  select pg_notify('${NOTIFY_CHANNEL}', '${NOTIFY_PAYLOAD}') from (select 1 from ins where ins.type not in (${STEP_TYPES_SQL}) limit 1) x
)
select it.item, it.current,
       (select count(*) from notified)::int as notified,
       (select count(*) from proj)::int as projected,
       array(select ins.global_position::text from ins join streams s on s.stream_id = ins.stream_id and s.item = it.item order by ins.global_position) as positions
from items it`;

/** The statement's parameters: ten columns of one entry per event, then the schema version stamped on every row and the read models. */
class Columns {
  readonly cols: unknown[][] = Array.from({ length: 10 }, () => []);
  readonly readModels: TaskRow[] = [];

  add(item: number, streamId: string, taskId: string, expected: number | null, version: number, e: TimedEvent): void {
    const c = this.cols;
    c[0]!.push(item);
    c[1]!.push(streamId);
    c[2]!.push(taskId);
    c[3]!.push(expected);
    c[4]!.push(version);
    c[5]!.push(e.id);
    c[6]!.push(e.type);
    c[7]!.push(storableJson(e.data));
    c[8]!.push(storableJson({ ...e.metadata, schemaVersion: CURRENT_SCHEMA_VERSION }));
    c[9]!.push(e.recordedAt ?? null);
  }

  values(): unknown[] {
    return [...this.cols, CURRENT_SCHEMA_VERSION, storableJson(this.readModels)];
  }
}

async function run(pool: Pick<pg.Pool, 'query'>, name: string, cols: Columns, items: number): Promise<BatchItemResult[]> {
  const res = await pool.query<{ item: number; current: number; positions: string[] }>({ name, text: APPEND_SQL, values: cols.values() });
  const out: BatchItemResult[] = Array.from({ length: items }, () => ({ currentVersion: 0, positions: [] }));
  for (const r of res.rows) out[r.item] = { currentVersion: r.current, positions: r.positions.map(BigInt) };
  return out;
}

function columnsOf(inputs: readonly AppendInput[]): Columns {
  const cols = new Columns();
  inputs.forEach((input, item) => {
    input.events.forEach((e, i) => cols.add(item, input.streamId, input.taskId, i === 0 ? input.expectedVersion : null, input.expectedVersion + i + 1, e));
    if (input.readModel) cols.readModels.push(input.readModel);
  });
  return cols;
}

/** Several appends (to distinct streams) in one statement. A failure fails them all. */
export function appendBatch(pool: Pick<pg.Pool, 'query'>, inputs: readonly AppendInput[]): Promise<BatchItemResult[]> {
  return run(pool, 'baton_append_batch', columnsOf(inputs), inputs.length);
}

/**
 * One statement for one item. A racing writer that took the version first is a
 * ConcurrencyError on `conflictStream`; one that recorded the same ids first is "nothing
 * written", for the caller to resolve.
 */
async function runOne(pool: Pick<pg.Pool, 'query'>, cols: Columns, conflictStream: string, expected: number): Promise<BatchItemResult> {
  try {
    return (await run(pool, 'baton_append', cols, 1))[0] as BatchItemResult;
  } catch (err) {
    if (isUniqueViolation(err, 'events_stream_version_uq')) throw new ConcurrencyError(conflictStream, expected, null);
    if (isUniqueViolation(err, 'events_event_id_uq')) return { currentVersion: -1, positions: [] };
    throw err;
  }
}

/** One append: a batch of one. */
export function appendOne(pool: Pick<pg.Pool, 'query'>, input: AppendInput): Promise<BatchItemResult> {
  return runOne(pool, columnsOf([input]), input.streamId, input.expectedVersion);
}

/**
 * A whole new task (a fork): one item spanning its streams, each expected empty, every event
 * at its given version, inserted in the given (log) order, all recorded at `recordedAt`.
 */
export function appendImport(pool: Pick<pg.Pool, 'query'>, taskId: string, events: readonly ForkedEvent[], readModel: TaskRow, recordedAt: Date): Promise<BatchItemResult> {
  const cols = new Columns();
  const seen = new Set<string>();
  for (const c of events) {
    cols.add(0, c.streamId, taskId, seen.has(c.streamId) ? null : 0, c.version, { ...c.event, recordedAt });
    seen.add(c.streamId);
  }
  cols.readModels.push(readModel);
  return runOne(pool, cols, taskStreamId(taskId), 0);
}

function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && e.constraint === constraint;
}
