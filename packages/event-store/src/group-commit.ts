import type pg from 'pg';
import { appendBatch, appendOne, type AppendInput, type BatchItemResult } from './append.ts';

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
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  batches = 0;
  batchedAppends = 0;

  constructor(pool: Pick<pg.Pool, 'query'>, opts: { maxBatch?: number; maxInFlight?: number } = {}) {
    this.pool = pool;
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
      await appendOne(this.pool, p.input).then(p.resolve, p.reject);
      return;
    }
    this.batches++;
    this.batchedAppends += batch.length;
    try {
      const results = await appendBatch(this.pool, batch.map((p) => p.input));
      batch.forEach((p, i) => p.resolve(results[i] as BatchItemResult));
    } catch {
      await Promise.all(batch.map((p) => appendOne(this.pool, p.input).then(p.resolve, p.reject)));
    }
  }
}
