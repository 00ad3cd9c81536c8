import type pg from 'pg';
import { NOTIFY_CHANNEL, storedColumns, TASKS_UPSERT_CONFLICT } from './sql.ts';
import type { AppendInput } from './store.ts';

/** The outcome of one append inside a batch: its positions, or the stream's current version when nothing was written. */
export interface BatchItemResult {
  currentVersion: number;
  positions: bigint[];
}

// Many appends, one statement (one round trip, one commit). Each item has its own version
// guard and duplicate check; items that fail their guard write nothing and are resolved by
// the caller exactly like a single append that wrote nothing.
const BATCH_SQL = `
with input as (
  select * from unnest($1::int[], $2::text[], $3::uuid[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::int[], $9::jsonb[], $10::jsonb[])
    as i(item, stream_id, task_id, expected, ord, event_id, type, schema_version, data, metadata)
), items as (
  select distinct item, stream_id, expected from input
), guard as (
  select it.item, it.stream_id, it.expected,
         coalesce((select e.stream_version from events e where e.stream_id = it.stream_id order by e.stream_version desc limit 1), 0) as current,
         exists (select 1 from events e where e.event_id in (select x.event_id from input x where x.item = it.item)) as dup
  from items it
), ins as (
  insert into events (stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata)
  select i.stream_id, i.expected + i.ord, i.task_id, i.event_id, i.type, i.schema_version, i.data, i.metadata
  from input i join guard g on g.item = i.item
  where g.current = i.expected and not g.dup
  order by i.item, i.ord
  on conflict (event_id) do nothing
  returning stream_id, stream_version, global_position
), proj as (
  insert into tasks
  select r.* from jsonb_populate_recordset(null::tasks, $11::jsonb) r
  where exists (select 1 from ins where ins.stream_id = 'task-' || r.id::text)
  ${TASKS_UPSERT_CONFLICT}
  returning 1
), notified as (
  select pg_notify('${NOTIFY_CHANNEL}', '') from (select 1 from ins limit 1) x
)
select g.item, g.current,
       (select count(*) from notified)::int as notified,
       (select count(*) from proj)::int as projected,
       array(select ins.global_position::text from ins where ins.stream_id = g.stream_id order by ins.stream_version) as positions
from guard g order by g.item`;

export async function appendBatch(pool: Pick<pg.Pool, 'query'>, inputs: readonly AppendInput[]): Promise<BatchItemResult[]> {
  const cols: unknown[][] = Array.from({ length: 10 }, () => []);
  inputs.forEach((input, item) => {
    input.events.forEach((e, i) => {
      const c = storedColumns(e);
      const row = [item, input.streamId, input.taskId, input.expectedVersion, i + 1, e.id, c.type, c.schemaVersion, c.data, c.metadata];
      row.forEach((v, c) => (cols[c] as unknown[]).push(v));
    });
  });
  const readModels = inputs.map((i) => i.readModel).filter((r) => r !== undefined);
  const res = await pool.query<{ item: number; current: number; positions: string[] }>({
    name: 'baton_append_batch',
    text: BATCH_SQL,
    values: [...cols, JSON.stringify(readModels)],
  });
  const out: BatchItemResult[] = inputs.map(() => ({ currentVersion: 0, positions: [] }));
  for (const r of res.rows) out[r.item] = { currentVersion: r.current, positions: r.positions.map(BigInt) };
  return out;
}

interface Pending {
  input: AppendInput;
  resolve: (r: BatchItemResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit: while a batch is being written, new appends wait; when it is done, all that
 * queued up are written together. A lone append goes straight through (no added latency).
 * Two appends to one stream never share a batch. If the batch statement fails as a whole
 * (e.g. a concurrent writer elsewhere hit a unique constraint), every item is retried alone,
 * so one append's conflict never fails another's.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private readonly pool: Pick<pg.Pool, 'query'>;
  private readonly single: (input: AppendInput) => Promise<BatchItemResult>;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  batches = 0;
  batchedAppends = 0;

  constructor(pool: Pick<pg.Pool, 'query'>, single: (input: AppendInput) => Promise<BatchItemResult>, opts: { maxBatch?: number; maxInFlight?: number } = {}) {
    this.pool = pool;
    this.single = single;
    this.maxBatch = opts.maxBatch ?? 128;
    this.maxInFlight = opts.maxInFlight ?? 2;
  }

  submit(input: AppendInput): Promise<BatchItemResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      const streams = new Set<string>();
      for (const p of this.queue) {
        if (batch.length < this.maxBatch && !streams.has(p.input.streamId)) {
          streams.add(p.input.streamId);
          batch.push(p);
        } else rest.push(p);
      }
      this.queue = rest;
      this.inFlight++;
      void this.write(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async write(batch: Pending[]): Promise<void> {
    if (batch.length === 1) {
      const p = batch[0] as Pending;
      await this.single(p.input).then(p.resolve, p.reject);
      return;
    }
    this.batches++;
    this.batchedAppends += batch.length;
    try {
      const results = await appendBatch(this.pool, batch.map((p) => p.input));
      batch.forEach((p, i) => p.resolve(results[i] as BatchItemResult));
    } catch {
      await Promise.all(batch.map((p) => this.single(p.input).then(p.resolve, p.reject)));
    }
  }
}
