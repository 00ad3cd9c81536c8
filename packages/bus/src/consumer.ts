import { isConnectionError, setBounded } from '@baton/runtime';
import { contextFromCarrier, inSpan, metrics, onScrape, runInContext, SpanKind, withTaskId, type Span } from '@baton/telemetry';
import type { ConsumerInfo, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/nats-core';
import type { Logger } from 'pino';
import type { ZodType } from 'zod';
import { sendSoon } from './coalesce.ts';

/**
 * Why a handler's signal aborted when its consumer is stopping (a graceful shutdown that ran
 * past its grace): the message is handed back, and the handler may tell this apart from its
 * own time running out (`maxHandlerMs`) by `signal.reason`.
 */
export class ConsumerStoppingError extends Error {
  constructor() {
    super('the consumer is stopping (a graceful shutdown): the message is handed back');
    this.name = new.target.name;
  }
}

/** What a handler decides about a message. Returning nothing means ack. */
export type Outcome = { kind: 'ack' } | { kind: 'retry'; delayMs?: number; reason?: string } | { kind: 'term'; reason: string };
export const ack: Outcome = { kind: 'ack' };
export const retry = (reason: string, delayMs?: number): Outcome => ({ kind: 'retry', reason, ...(delayMs !== undefined ? { delayMs } : {}) });

/** A consumer's pending, unacknowledged and redelivered counts as the server reports them, into its gauges. */
export function setConsumerGauges(consumer: string, info: Pick<ConsumerInfo, 'num_pending' | 'num_ack_pending' | 'num_redelivered'>): void {
  metrics.consumerPending.set({ consumer }, info.num_pending);
  metrics.consumerAckPending.set({ consumer }, info.num_ack_pending);
  metrics.consumerRedelivered.set({ consumer }, info.num_redelivered);
}

export interface HandlerContext {
  subject: string;
  /** The message's headers (its own; absent when it has none). */
  headers: MsgHdrs | undefined;
  deliveryCount: number;
  /** The attempts that count, this one included (deliveries failed on a lost connection do not). */
  attempt: number;
  /** This is the last attempt allowed: a retry asked for now makes the message a dead letter. */
  lastAttempt: boolean;
  streamSequence: number;
  /** Extend ack_wait (the helper also does this on a timer while the handler runs). */
  working(): void;
  /** Aborted when the consumer stops; long handlers should give up and let the message be redelivered. */
  signal: AbortSignal;
  /**
   * Aborted the moment the consumer begins to stop (before the grace period that `signal` waits
   * for): start no new work. A handler that throws its reason (a ConsumerStoppingError) hands the
   * message back, uncounted.
   */
  stopping: AbortSignal;
  /** The consumer's span for this message (the API's no-op span when tracing is off). */
  span: Span;
}

export interface DeadLetter {
  consumer: string;
  subject: string;
  streamSequence: number;
  /**
   * When the stream stored the message, in nanoseconds since the epoch (NATS's own stamp, the same
   * on every delivery). With the sequence it names one message for good: a stream deleted and
   * made again (a bus wipe, the log re-feeding it) numbers its messages from 1 again.
   */
  storedAtNanos: bigint;
  deliveries: number;
  payload: string;
  error: string;
  /**
   * Its last counted delivery was never settled by its handler — the process died (a crash, a
   * kill), handed the message back (a stop) or ran out of time — rather than ending in an error
   * the handler reported (earlier deliveries may have). Nothing says the message is at fault:
   * processes restarted during a Postgres outage count deliveries that only failed on the lost
   * connection (a restarted process forgets its predecessor's). See `deadLetterGivesUp`.
   */
  unsettled: boolean;
}

export interface ConsumerOptions<T> {
  js: JetStreamClient;
  stream: string;
  consumer: string;
  schema: ZodType<T>;
  handle: (payload: T, ctx: HandlerContext) => Promise<Outcome | void>;
  /** How long each pull request waits on the server (default 5 s). */
  pullExpiresMs?: number;
  /** Messages handled at once. */
  concurrency?: number;
  /**
   * Deliveries before a message is dead-lettered (counting crashed attempts too, but not the
   * attempts that failed on a lost connection: see `isTransient`).
   */
  maxAttempts?: number;
  /** Delay before the n-th redelivery (last value repeats). */
  backoffMs?: readonly number[];
  /**
   * Whether a handler's error only says a connection was lost (default: `lostInfrastructure` —
   * Postgres or NATS gone, refused, reset). Such a failure is retried after
   * `connectionBackoffMs` and never counts toward `maxAttempts`: an outage of any length
   * dead-letters nothing.
   */
  isTransient?: (err: unknown) => boolean;
  /** Delay before retrying after the n-th consecutive connection failure (last value repeats). */
  connectionBackoffMs?: readonly number[];
  /** Interval of `working()` heartbeats while a handler runs; keep below the consumer's ack_wait. */
  heartbeatMs?: number;
  /**
   * The longest a handler may hold a message (default: no limit). Past it the heartbeats stop,
   * the handler's signal aborts and the message is handed back (nak) for another delivery: a
   * handler that hangs can then never hold its work forever (its late writes are fenced).
   */
  maxHandlerMs?: number;
  /**
   * How long `stop()` lets handlers still running finish before their signal aborts (reason: a
   * ConsumerStoppingError) and their messages are handed back; default 10 s.
   */
  stopGraceMs?: number;
  onDeadLetter: (d: DeadLetter) => Promise<void>;
  /**
   * A message back past its attempts without having been settled (its handlers kept stopping or
   * crashing mid-way) is handed here before it is dead-lettered, for what it owed to be recorded as
   * given up (the notifier: each webhook and mail not delivered) instead of left as if a retry
   * were coming. Failing, it is tried again at the next delivery.
   */
  onUnsettled?: (payload: T, why: string) => Promise<void>;
  /** The server said the stream or consumer is gone (a TopologyWatch re-creates it; pulls then resume). */
  onMissing?: (status: string) => void;
  log: Logger;
}

export interface RunningConsumer {
  stop(): Promise<void>;
  readonly inFlight: number;
}

/**
 * The consumer's default `isTransient`: `isConnectionError` (@baton/runtime) — a lost, refused or
 * reset connection, a Postgres or NATS connection error — unless it came through an HTTP client
 * (fetch's `fetch failed`, the model SDK's `APIConnectionError`): a model or webhook endpoint that
 * cannot be reached is an outside service failing, and keeps counting toward the attempts (a
 * lead whose model stays unreachable fails `lead_failed`, as before).
 */
export function lostInfrastructure(err: unknown): boolean {
  return isConnectionError(err) && !viaHttpClient(err);
}

function viaHttpClient(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as { name?: unknown; message?: unknown; cause?: unknown };
  if (typeof e.name === 'string' && /^APIConnection(Timeout)?Error$/.test(e.name)) return true;
  if (e.name === 'TypeError' && e.message === 'fetch failed') return true;
  return viaHttpClient(e.cause, depth + 1);
}

/**
 * Pull-consume a durable consumer with explicit acks: a handler's outcome acks, naks with a
 * delay (backoff), or terms; a thrown error is retried with backoff; a message that has been
 * delivered `maxAttempts` times (crashes included) is recorded as a dead letter and termed.
 * A payload that fails its schema is a poison message: dead-lettered at once.
 *
 * A thrown connection error (`isTransient`) is retried too, but its delivery is not counted:
 * this process remembers, per message, how many of its deliveries ended that way and takes
 * them off the delivery count. (The memory is the process's own: one that restarts counts a
 * message's earlier connection failures as ordinary deliveries again.)
 */
export async function startConsumer<T>(o: ConsumerOptions<T>): Promise<RunningConsumer> {
  const concurrency = o.concurrency ?? 16;
  const maxAttempts = o.maxAttempts ?? 8;
  const backoff = o.backoffMs ?? [250, 1000, 5000, 15_000, 60_000];
  const heartbeatMs = o.heartbeatMs ?? 10_000;
  const isTransient = o.isTransient ?? lostInfrastructure;
  const connectionBackoff = o.connectionBackoffMs ?? [250, 1000, 2000, 5000];
  // A message (its sequence and stored time: a stream made again numbers from 1 again) → this
  // process's deliveries of it that failed on a lost connection (not counted toward maxAttempts).
  // Forgotten once the message is settled here; bounded, since a message handed back may be
  // settled by another replica.
  const connectionFailures = new Map<string, number>();
  const keyOf = (m: JsMsg): string => `${m.info.streamSequence}@${m.timestampNanos}`;
  const attemptsOf = (m: JsMsg): number => m.info.deliveryCount - (connectionFailures.get(keyOf(m)) ?? 0);
  const settled = (m: JsMsg): void => void connectionFailures.delete(keyOf(m));
  const consumer = await o.js.consumers.get(o.stream, o.consumer);
  // Pending, unacknowledged and redelivered counts, read from the server when metrics are scraped.
  const stopScrape = onScrape(async () => setConsumerGauges(o.consumer, await consumer.info()));
  const handled = (outcome: 'ack' | 'retry' | 'transient' | 'dead_letter' | 'handed_back'): void => metrics.messagesHandled.inc({ consumer: o.consumer, outcome });
  // Short pull expiry: a pull the server lost (it happens on NATS 2.9 around consumer updates)
  // is replaced within seconds rather than after the 30 s default.
  const messages = await consumer.consume({ max_messages: Math.max(concurrency, 1) * 2, expires: o.pullExpiresMs ?? 5000 });
  const abort = new AbortController();
  /** Aborted as `stop()` begins: messages not started yet go back, handlers start nothing new. */
  const stopping = new AbortController();
  const inFlight = new Set<Promise<void>>();
  /** The messages handled now, by stream sequence (each its handling's own token). */
  const handling = new Map<number, object>();
  /** Forget a message's handling — its own only (a handler that ran past its limit, then a new delivery of it). */
  const doneHandling = (seq: number, token: object): void => {
    if (handling.get(seq) === token) handling.delete(seq);
  };
  let slotFree: (() => void) | null = null;

  void (async () => {
    for await (const s of messages.status()) {
      // Missed heartbeats while every slot is busy are this process not pulling (by design), not NATS away: debug then.
      if (s.type === 'heartbeats_missed' && inFlight.size >= concurrency) o.log.debug({ status: s, inFlight: inFlight.size }, 'consumer status (every slot busy: not pulling)');
      else if (s.type === 'heartbeats_missed' || s.type === 'consumer_not_found' || s.type === 'consumer_deleted' || s.type === 'stream_not_found') {
        o.log.warn({ status: s }, 'consumer status');
      }
      if (s.type === 'consumer_not_found' || s.type === 'consumer_deleted' || s.type === 'stream_not_found') o.onMissing?.(s.type);
    }
  })().catch(() => {});

  const delayFor = (deliveryCount: number): number => backoff[Math.min(deliveryCount - 1, backoff.length - 1)] ?? 1000;

  const deadLetter = async (m: JsMsg, error: string, unsettled = false): Promise<void> => {
    try {
      await o.onDeadLetter({ consumer: o.consumer, subject: m.subject, streamSequence: m.info.streamSequence, storedAtNanos: m.timestampNanos, deliveries: m.info.deliveryCount, payload: m.string(), error, unsettled });
      m.term();
      settled(m);
      handled('dead_letter');
      o.log.error({ subject: m.subject, deliveries: m.info.deliveryCount, error }, 'message dead-lettered');
    } catch (err) {
      // Could not record it: leave it to be redelivered rather than lose it.
      o.log.error({ err, subject: m.subject }, 'failed to record dead letter; will retry');
      m.nak(delayFor(m.info.deliveryCount));
    }
  };

  // A message continues the trace its W3C headers name (the event that caused it); the handler
  // runs inside the consumer's span, with the task id (when the payload has one) for the logs.
  const traced = <R>(m: JsMsg, payload: T, fn: (span: Span) => Promise<R>): Promise<R> => {
    const taskId = (payload as { taskId?: unknown } | null)?.taskId;
    const parent = contextFromCarrier({ traceparent: m.headers?.get('traceparent') || undefined, tracestate: m.headers?.get('tracestate') || undefined });
    const run = (): Promise<R> =>
      inSpan(
        `process ${o.consumer}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: { 'messaging.system': 'nats', 'messaging.operation.type': 'process', 'messaging.destination.name': m.subject, 'messaging.consumer.group.name': o.consumer, 'messaging.message.delivery_count': m.info.deliveryCount, ...(typeof taskId === 'string' ? { 'baton.task_id': taskId } : {}) },
        },
        fn,
      );
    // The span's parent is the active context — the message's trace, with the task id the logs take (not `parent` alone, which has none).
    return runInContext(parent, () => (typeof taskId === 'string' ? withTaskId(taskId, run) : run()));
  };

  const handleOne = async (m: JsMsg, handedBack: () => void): Promise<void> => {
    const deliveryCount = m.info.deliveryCount;
    // Deliveries that count: this one and the earlier ones that did not fail on a lost connection.
    const attempt = attemptsOf(m);
    if (attempt > maxAttempts) {
      const why = `delivered ${deliveryCount} times, past the ${maxAttempts} attempts allowed, without being settled (a handler that crashed or ran out of time; or fewer attempts allowed since)${attempt < deliveryCount ? `; ${deliveryCount - attempt} failed on a lost connection and do not count` : ''}`;
      const parsed = o.onUnsettled ? o.schema.safeParse(m.json()) : null;
      if (o.onUnsettled && parsed?.success) {
        try {
          await o.onUnsettled(parsed.data, why);
        } catch (err) {
          o.log.warn({ err, subject: m.subject, deliveryCount }, 'could not record what the unsettled message owed; trying again at its next delivery');
          m.nak(delayFor(attempt));
          handled('retry');
          return;
        }
      }
      return deadLetter(m, why, true);
    }
    let payload: T;
    try {
      payload = o.schema.parse(m.json());
    } catch (err) {
      return deadLetter(m, `invalid payload: ${err instanceof Error ? err.message : String(err)}`);
    }
    const timer = setInterval(() => m.working(), heartbeatMs);
    // The handler's own signal: the consumer stopping, or this message's time running out.
    const own = new AbortController();
    const onStop = (): void => own.abort(abort.signal.reason);
    abort.signal.addEventListener('abort', onStop, { once: true });
    let expired = false;
    const limit = o.maxHandlerMs
      ? setTimeout(() => {
          expired = true;
          clearInterval(timer);
          o.log.error({ subject: m.subject, deliveryCount, maxHandlerMs: o.maxHandlerMs }, 'handler ran past its limit: aborted, message handed back');
          own.abort(new Error(`handler ran past ${o.maxHandlerMs} ms`));
          handedBack(); // its next delivery is handled, though this handler may never return
          m.nak(0);
          handled('handed_back');
        }, o.maxHandlerMs)
      : null;
    const started = performance.now();
    try {
      const outcome = (await traced(m, payload, (span) =>
        o.handle(payload, {
          subject: m.subject,
          headers: m.headers,
          deliveryCount,
          attempt,
          lastAttempt: attempt >= maxAttempts,
          streamSequence: m.info.streamSequence,
          working: () => {
            if (!expired) m.working();
          },
          signal: own.signal,
          stopping: stopping.signal,
          span,
        }),
      )) ?? ack;
      if (expired) return; // handed back already
      if (outcome.kind === 'ack') {
        sendSoon.soon(() => m.ack()); // acks of one turn share a socket write (coalesce.ts)
        settled(m);
        handled('ack');
      } else if (outcome.kind === 'term') await deadLetter(m, outcome.reason);
      else if (attempt >= maxAttempts) await deadLetter(m, `gave up after ${attempt} attempts: ${outcome.reason ?? 'retry requested'}`);
      else {
        m.nak(outcome.delayMs ?? delayFor(attempt));
        handled('retry');
      }
    } catch (err) {
      if (expired) return;
      if (own.signal.aborted || err instanceof ConsumerStoppingError) {
        m.nak(0);
        handled('handed_back');
        return;
      }
      if (isTransient(err)) {
        // A lost connection says nothing about the message: retry it, and do not count this delivery.
        const failures = (connectionFailures.get(keyOf(m)) ?? 0) + 1;
        setBounded(connectionFailures, keyOf(m), failures, 10_000);
        const delayMs = connectionBackoff[Math.min(failures - 1, connectionBackoff.length - 1)] ?? 1000;
        // Once per message at warn: an outage fails every message in flight, again and again.
        (failures === 1 ? o.log.warn : o.log.debug).call(o.log, { err, subject: m.subject, deliveryCount, connectionFailures: failures, delayMs }, 'handler failed on a lost connection; will retry (not counted as an attempt)');
        m.nak(delayMs);
        handled('transient');
        return;
      }
      const error = err instanceof Error ? err.message : String(err);
      if (attempt >= maxAttempts) await deadLetter(m, `gave up after ${attempt} attempts: ${error}`);
      else {
        o.log.warn({ err, subject: m.subject, deliveryCount, attempt }, 'handler failed; will retry');
        m.nak(delayFor(attempt));
        handled('retry');
      }
    } finally {
      metrics.handlerSeconds.observe({ consumer: o.consumer }, (performance.now() - started) / 1000);
      clearInterval(timer);
      if (limit) clearTimeout(limit);
      abort.signal.removeEventListener('abort', onStop);
    }
  };

  const loop = (async () => {
    for await (const m of messages) {
      while (inFlight.size >= concurrency) {
        await new Promise<void>((r) => (slotFree = r));
      }
      // Pulled before the consumer began to stop, not started: handed back for another process, never begun here.
      if (stopping.signal.aborted) {
        m.nak(0);
        handled('handed_back');
        continue;
      }
      // Delivered again while a handler here still works on it (the server took it for lost): not handled
      // twice at once — that had sent a webhook twice within milliseconds and counted two attempts as
      // one moment. The delivery at work settles the message (an ack or nak of either delivery is
      // the message's); this one is left, and comes back only if that one does not settle it.
      const seq = m.info.streamSequence;
      if (handling.has(seq)) {
        o.log.debug({ subject: m.subject, deliveryCount: m.info.deliveryCount }, 'delivered again while still being handled here: left to the delivery at work');
        continue;
      }
      const token = {};
      handling.set(seq, token);
      const p: Promise<void> = handleOne(m, () => doneHandling(seq, token))
        .catch((err: unknown) => o.log.error({ err }, 'unexpected consumer error'))
        .finally(() => {
          doneHandling(seq, token);
          inFlight.delete(p);
          const f = slotFree;
          slotFree = null;
          f?.();
        });
      inFlight.add(p);
    }
  })();

  return {
    get inFlight() {
      return inFlight.size;
    },
    async stop() {
      stopping.abort(new ConsumerStoppingError());
      stopScrape();
      messages.stop();
      await loop.catch(() => {});
      // Let in-flight work finish (graceful drain); handlers see the signal only if they are still running after that.
      const grace = new Promise((r) => setTimeout(r, o.stopGraceMs ?? 10_000).unref());
      await Promise.race([Promise.allSettled([...inFlight]), grace]);
      abort.abort(new ConsumerStoppingError());
      await Promise.allSettled([...inFlight]);
      sendSoon.flush(); // the acks of the last handlers go before the connection is drained
    },
  };
}
