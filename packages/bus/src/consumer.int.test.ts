import { currentTraceCarrier, inSpan, logContext, startTracing, stopTracing } from '@baton/telemetry';
import { stackTest as test, waitFor, writeSyscalls } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import pino from 'pino';
import { describe, expect } from 'vitest';
import { z } from 'zod';
import { ConsumerStoppingError, startConsumer, retry, type DeadLetter } from './consumer.ts';
import { countDeadLetters, deadLetterGivesUp, deadLetterRecorder } from './dead-letters.ts';
import { busNames } from './subjects.ts';
import { ensureTopology } from './topology.ts';

const log = pino({ level: 'silent' });
const Job = z.object({ n: z.number() });

describe('startConsumer', () => {
  test("with tracing on, a handler's log lines carry the message's trace and its task's id (the span was parented on the trace alone, and task_id was lost)", async ({ nats }) => {
    // Spans recorded nowhere: what is checked is the context a handler runs in.
    const exporter: NonNullable<NonNullable<Parameters<typeof startTracing>[2]>['exporter']> = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
    startTracing('t', {}, { exporter });
    try {
      const names = busNames(nats.namespace);
      await ensureTopology(await jetstreamManager(nats.nc), names);
      const js = jetstream(nats.nc);
      const seen: ReturnType<typeof logContext>[] = [];
      const c = await startConsumer({
        js, stream: names.jobsStream, consumer: names.consumers.runner, schema: z.object({ taskId: z.string() }), log, onDeadLetter: async () => {},
        handle: async () => void seen.push(logContext()),
      });
      const taskId = '00000000-0000-4000-8000-000000000007';
      const { traceId, h } = inSpan('publish', {}, (span) => {
        const h = headers();
        for (const [k, v] of Object.entries(currentTraceCarrier())) if (v) h.set(k, v);
        return { traceId: span.spanContext().traceId, h };
      });
      await js.publish(names.jobSubject('run', taskId, 'a1'), JSON.stringify({ taskId }), { headers: h });
      await waitFor(() => seen.length === 1, { what: 'the message handled' });
      await c.stop();
      expect(seen[0]).toEqual({ trace_id: traceId, span_id: expect.stringMatching(/^[0-9a-f]{16}$/), task_id: taskId });
    } finally {
      stopTracing();
    }
  });

  test('acks, retries with backoff, and dead-letters a message once its attempts are exhausted', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const attempts = new Map<number, number>();
    const dead: DeadLetter[] = [];
    const record = deadLetterRecorder(pg.db.pool);
    const c = await startConsumer({
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log,
      maxAttempts: 3, backoffMs: [50, 100],
      onDeadLetter: async (d) => { dead.push(d); await record(d); },
      handle: async ({ n }) => {
        attempts.set(n, (attempts.get(n) ?? 0) + 1);
        if (n === 1) return; // ok
        if (n === 2 && attempts.get(n)! < 2) return retry('transient'); // ok on 2nd attempt
        if (n === 3) throw new Error('always fails');
      },
    });
    for (const n of [1, 2, 3]) await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', `a${n}`), JSON.stringify({ n }));
    await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'bad'), 'not json at all');
    await waitFor(() => dead.length === 2, { what: 'two dead letters' });
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).streams.info(names.jobsStream)).state.messages === 0, { what: 'work queue empty' });
    await c.stop();
    expect(attempts.get(1)).toBe(1);
    expect(attempts.get(2)).toBe(2);
    expect(attempts.get(3)).toBe(3);
    expect(dead.map((d) => d.error).sort()).toEqual([expect.stringMatching(/gave up after 3 attempts: always fails/), expect.stringMatching(/invalid payload/)].sort());
    expect(dead.map((d) => d.unsettled)).toEqual([false, false]); // each failed in the handler's own words
    const { rows } = await pg.db.pool.query('select consumer, deliveries from dead_letters order by id');
    expect(rows).toHaveLength(2);
    expect(rows[0].consumer).toBe('runner-jobs');
  });

  test('stop() gives running handlers a grace, then aborts them with a ConsumerStoppingError and hands their messages back; a time limit aborts with another reason', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const reasons: unknown[] = [];
    let running = 0;
    const opts = {
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, maxHandlerMs: 60_000, stopGraceMs: 200,
      onDeadLetter: async () => {},
      // A handler that runs until its signal aborts, and notes why.
      handle: async (_job: { n: number }, ctx: { signal: AbortSignal }) => {
        running++;
        await new Promise<void>((_, reject) => ctx.signal.addEventListener('abort', () => {
          reasons.push(ctx.signal.reason);
          reject(ctx.signal.reason as Error);
        }, { once: true }));
      },
    };
    const c = await startConsumer(opts);
    await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'a'), JSON.stringify({ n: 1 }));
    await waitFor(() => running === 1, { what: 'the handler to run' });
    await c.stop();
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(ConsumerStoppingError);
    // Handed back: the next consumer gets the message again; its time limit aborts it for another reason.
    const again = await startConsumer({ ...opts, maxHandlerMs: 100 });
    await waitFor(() => reasons.length === 2, { what: 'the message delivered again, and its time limit' });
    expect(reasons[1]).not.toBeInstanceOf(ConsumerStoppingError);
    expect(String(reasons[1])).toMatch(/handler ran past 100 ms/);
    await again.stop();
  });

  test('once stop() begins, nothing new starts: messages pulled and waiting for a slot go back unstarted, and a handler told `stopping` hands its message back uncounted', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const started: number[] = [];
    let release: () => void = () => {};
    const opts = {
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, concurrency: 1, stopGraceMs: 60_000,
      onDeadLetter: async () => {},
      handle: async (job: { n: number }, ctx: { stopping: AbortSignal }) => {
        started.push(job.n);
        if (job.n === 1) await new Promise<void>((r) => (release = r)); // the one running when the stop begins
        ctx.stopping.throwIfAborted(); // what a runner's job checks before it claims anything
      },
    };
    const c = await startConsumer(opts);
    for (const n of [1, 2, 3]) await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', `a${n}`), JSON.stringify({ n }));
    await waitFor(() => started.length === 1, { what: 'the first handler to run' });
    const stopped = c.stop();
    release();
    await stopped;
    expect(started).toEqual([1]); // 2 and 3 were pulled (or waiting) but never begun
    // None acknowledged: all three are still the stream's to deliver to another process (the first handed back by its `stopping` check).
    const info = await (await jetstreamManager(nats.nc)).consumers.info(names.jobsStream, names.consumers.runner);
    expect(info.ack_floor.stream_seq).toBe(0);
  });

  test('the acks of handlers that finish in separate callbacks of one event-loop turn go to the server in one socket write', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const n = 20;
    let started = 0;
    let finished = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const c = await startConsumer({
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, concurrency: n,
      onDeadLetter: async () => {},
      handle: async () => {
        started++;
        await gate;
        // Each handler ends in its own callback (as each would after its own Postgres reply).
        await new Promise((r) => setImmediate(r));
        finished++;
      },
    });
    for (let i = 0; i < n; i++) await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', `a${i}`), JSON.stringify({ n: i }));
    await waitFor(() => started === n, { what: 'every message in a handler' });
    const before = writeSyscalls();
    release();
    await waitFor(() => finished === n, { what: 'every handler done' });
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r)); // the turn that sends the acks
    const writes = writeSyscalls() - before;
    // Without coalescing, each ack is a write of its own (20).
    expect(writes).toBeLessThanOrEqual(3);
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).streams.info(names.jobsStream)).state.messages === 0, { what: 'every message acked' });
    await c.stop();
  });

  test('a handler failing on a lost connection is retried without counting toward maxAttempts; other failures (a bug, an HTTP endpoint that refuses) still count', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const lost = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    // n=1: the connection is gone for its first six deliveries (twice maxAttempts), then it works.
    // n=2: lost, bug, lost, lost, bug, bug — its third real failure is its last attempt.
    // n=3: an HTTP endpoint (a model, a webhook) refuses: an outside service failing, which counts.
    const script: Record<number, ('lost' | 'bug' | 'http' | 'ok')[]> = {
      1: ['lost', 'lost', 'lost', 'lost', 'lost', 'lost', 'ok'],
      2: ['lost', 'bug', 'lost', 'lost', 'bug', 'bug', 'ok'],
      3: ['http', 'http', 'http', 'ok'],
    };
    const deliveries = new Map<number, number[]>();
    const dead: DeadLetter[] = [];
    let done = 0;
    const c = await startConsumer({
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log,
      maxAttempts: 3, backoffMs: [20], connectionBackoffMs: [20],
      onDeadLetter: async (d) => { dead.push(d); },
      handle: async ({ n }, ctx) => {
        const seen = deliveries.get(n) ?? [];
        seen.push(ctx.deliveryCount);
        deliveries.set(n, seen);
        const step = script[n]?.[seen.length - 1];
        if (step === 'lost') throw new Error('query failed', { cause: lost() });
        if (step === 'bug') throw new Error('a real failure');
        if (step === 'http') throw Object.assign(new Error('Connection error.', { cause: new TypeError('fetch failed', { cause: lost() }) }), { name: 'APIConnectionError' });
        done++;
      },
    });
    for (const n of [1, 2, 3]) await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', `a${n}`), JSON.stringify({ n }));
    await waitFor(() => done + dead.length === 3, { what: 'the three jobs settled' });
    expect(done).toBe(1);
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).streams.info(names.jobsStream)).state.messages === 0, { what: 'work queue empty' });
    await c.stop();
    expect(deliveries.get(1)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(deliveries.get(2)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(deliveries.get(3)).toEqual([1, 2, 3]);
    expect(dead.map((d) => d.error).sort()).toEqual([expect.stringMatching(/gave up after 3 attempts: Connection error/), expect.stringMatching(/gave up after 3 attempts: a real failure/)]);
  });

  test('a message whose handler never settles it (crash) is dead-lettered after maxAttempts deliveries', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const jsm = await jetstreamManager(nats.nc);
    await ensureTopology(jsm, names, { ackWaitMs: { runner: 1000 } });
    const js = jetstream(nats.nc);
    await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'x'), JSON.stringify({ n: 9 }));
    // Simulate crashing workers: take the message and never settle it, twice.
    const raw = await js.consumers.get(names.jobsStream, names.consumers.runner);
    for (let i = 0; i < 2; i++) {
      const m = await raw.next({ expires: 5000 });
      expect(m?.info.deliveryCount).toBe(i + 1);
    }
    const dead: DeadLetter[] = [];
    let handled = 0;
    // What it owed is handed over first, to be recorded as given up (the notifier's webhooks and mails); failing once, it comes back for it.
    const unsettled: { payload: unknown; why: string }[] = [];
    let failOnce = true;
    const c = await startConsumer({
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, maxAttempts: 2, backoffMs: [50],
      onDeadLetter: async (d) => { dead.push(d); },
      onUnsettled: async (payload, why) => {
        if (failOnce) {
          failOnce = false;
          throw new Error('Postgres said no');
        }
        unsettled.push({ payload, why });
      },
      handle: async () => { handled++; },
    });
    await waitFor(() => dead.length === 1, { what: 'dead letter after crashes' });
    await c.stop();
    expect(handled).toBe(0);
    expect(dead[0]?.error).toMatch(/delivered 4 times, past the 2 attempts allowed, without being settled/);
    expect(dead[0]?.unsettled).toBe(true); // nothing said against the message: its processes died
    expect(unsettled).toEqual([{ payload: { n: 9 }, why: dead[0]?.error }]);
  });

  test('a message delivered again while a handler here still works on it is not handled twice at once: the delivery at work settles it', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names, { ackWaitMs: { runner: 1000 } });
    const js = jetstream(nats.nc);
    await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'slow'), JSON.stringify({ n: 1 }));
    const starts: number[] = [];
    let running = 0;
    let most = 0;
    const c = await startConsumer({
      // No heartbeat within the ack wait: the server takes the message for lost and delivers it again mid-way.
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, heartbeatMs: 60_000,
      onDeadLetter: async () => {},
      handle: async (_p, ctx) => {
        starts.push(ctx.deliveryCount);
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 2500));
        running--;
      },
    });
    await waitFor(async () => starts.length >= 1 && running === 0 && (await (await jetstreamManager(nats.nc)).streams.info(names.jobsStream)).state.messages === 0, { timeoutMs: 15_000, what: 'the message handled and gone' });
    await c.stop();
    expect(most).toBe(1);
    expect(starts).toEqual([1]);
  });

  test('a handler that hangs past maxHandlerMs is aborted and its message handed back for another delivery', async ({ nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const deliveries: { count: number; aborted: () => boolean }[] = [];
    const c = await startConsumer({
      js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log,
      maxHandlerMs: 300, heartbeatMs: 100,
      onDeadLetter: async () => {},
      handle: async (_job, ctx) => {
        deliveries.push({ count: ctx.deliveryCount, aborted: () => ctx.signal.aborted });
        // The first delivery hangs until well after its limit (it finishes late; nothing it says counts).
        if (ctx.deliveryCount === 1) await new Promise((r) => ctx.signal.addEventListener('abort', () => setTimeout(r, 500)));
      },
    });
    await js.publish(names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'a1'), JSON.stringify({ n: 1 }));
    await waitFor(() => deliveries.length === 2, { what: 'the hung message delivered again' });
    expect(deliveries.map((d) => d.count)).toEqual([1, 2]);
    expect(deliveries[0]?.aborted()).toBe(true);
    await waitFor(async () => (await (await jetstreamManager(nats.nc)).streams.info(names.jobsStream)).state.messages === 0, { what: 'work queue empty' });
    await c.stop();
  });

  test('a stream deleted and made again numbers its messages from 1 again: a new message\'s dead letter is recorded and counted beside the old one of the same sequence, and a message is recorded once however often it is reported', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    const jsm = await jetstreamManager(nats.nc);
    await ensureTopology(jsm, names);
    const js = jetstream(nats.nc);
    const record = deadLetterRecorder(pg.db.pool);
    const dead: DeadLetter[] = [];
    const subject = names.jobSubject('run', '00000000-0000-4000-8000-000000000001', 'researcher-1');
    const run = async (): Promise<void> => {
      const c = await startConsumer({
        js, stream: names.jobsStream, consumer: names.consumers.runner, schema: Job, log, maxAttempts: 1,
        onDeadLetter: async (d) => { await record(d); dead.push(d); },
        handle: async () => { throw new Error('always fails'); },
      });
      const before = dead.length;
      await js.publish(subject, JSON.stringify({ n: 1 }));
      await waitFor(() => dead.length === before + 1, { what: 'the job dead-lettered' });
      await c.stop();
    };
    await run();
    await jsm.streams.delete(names.jobsStream); // a bus wipe; the topology is made again
    await ensureTopology(jsm, names);
    await run();
    expect(dead.map((d) => d.streamSequence)).toEqual([1, 1]);
    expect(dead[0]!.storedAtNanos).not.toBe(dead[1]!.storedAtNanos);
    await record(dead[1]!); // reported again (a redelivery after a crash before the term)
    const { rows } = await pg.db.pool.query<{ stream_sequence: string; stored_at: Date }>('select stream_sequence, stored_at from dead_letters order by id');
    expect(rows.map((r) => r.stream_sequence)).toEqual(['1', '1']);
    expect(rows.every((r) => r.stored_at instanceof Date)).toBe(true);
    expect(Math.abs(rows[1]!.stored_at.getTime() - Number(dead[1]!.storedAtNanos / 1_000_000n))).toBeLessThanOrEqual(1);
    expect(await countDeadLetters(pg.db.pool, names.consumers.runner, { subject })).toBe(2);
  });

  test("dead letters are counted per piece of work (an agent's jobs, a task's triggers); an unsettled one gives its work up only at the third", async ({ pg }) => {
    const record = deadLetterRecorder(pg.db.pool);
    const dl = (seq: number, subject: string, unsettled: boolean): DeadLetter => ({ consumer: 'c', subject, streamSequence: seq, storedAtNanos: 1_795_000_000_000_000_000n + BigInt(seq) * 1000n, deliveries: 6, payload: '{}', error: 'e', unsettled });
    await record(dl(1, 'baton.jobs.run.t1.researcher-1', true));
    await record(dl(2, 'baton.jobs.run.t1.researcher-10', true));
    await record(dl(3, 'baton.triggers.t1.ApprovalGranted', true));
    await record(dl(4, 'baton.triggers.t1.SubagentCompleted', true));
    await record(dl(4, 'baton.triggers.t1.SubagentCompleted', true)); // recorded once
    expect(await countDeadLetters(pg.db.pool, 'c', { subject: 'baton.jobs.run.t1.researcher-1' })).toBe(1);
    expect(await countDeadLetters(pg.db.pool, 'c', { prefix: 'baton.triggers.t1.' })).toBe(2);
    expect(await countDeadLetters(pg.db.pool, 'other', { prefix: 'baton.' })).toBe(0);
    expect([1, 2, 3].map((n) => deadLetterGivesUp({ unsettled: true }, n))).toEqual([false, false, true]);
    expect(deadLetterGivesUp({ unsettled: false }, 1)).toBe(true);
  });
});
