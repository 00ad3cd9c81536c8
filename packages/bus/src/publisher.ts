import { createInbox, headers, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/nats-core';
import { contextFromCarrier, currentTraceCarrier, failSpan, SpanKind, tracer, tracingOn, withSpan as traceContextWith, type Span, type TraceCarrier } from '@baton/telemetry';

export interface OutMessage {
  subject: string;
  data: Uint8Array | string;
  /** Nats-Msg-Id: JetStream drops a second message with the same id within its dedupe window. */
  msgId: string;
  /** The trace the message continues (an event's `traceparent`): sent as W3C headers. */
  trace?: TraceCarrier;
  /** A core-NATS message (a signal, in no stream): no PubAck awaited, no dedupe id. */
  core?: boolean;
  /** Headers of its own (the relay's place of an event: RELAYED_CURSOR_HEADER). */
  headers?: Record<string, string> | undefined;
}

/**
 * The headers of an outgoing message: its dedupe id and, when it continues a trace, the W3C
 * `traceparent`/`tracestate` — of a producer span when this process records spans (returned, to
 * be ended on the PubAck), else the carrier as it came.
 */
export function outHeaders(m: OutMessage): { h: MsgHdrs; span: Span | null } {
  const h = ownHeaders(m.headers);
  h.set('Nats-Msg-Id', m.msgId);
  if (!m.trace?.traceparent) return { h, span: null };
  let carrier = m.trace;
  let span: Span | null = null;
  if (tracingOn()) {
    const parent = contextFromCarrier(m.trace);
    span = tracer().startSpan(
      `publish ${subjectKind(m.subject)}`,
      { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'nats', 'messaging.operation.type': 'send', 'messaging.destination.name': m.subject, 'messaging.message.id': m.msgId } },
      parent,
    );
    carrier = currentTraceCarrier(traceContextWith(parent, span));
  }
  for (const [k, v] of Object.entries(carrier)) if (v) h.set(k, v);
  return { h, span };
}

/** A message's own headers (a core message sends only these: no dedupe id, no trace). */
function ownHeaders(own: Record<string, string> = {}): MsgHdrs {
  const h = headers();
  for (const [k, v] of Object.entries(own)) h.set(k, v);
  return h;
}

/** A subject's kind for span names (`baton.jobs.run.<task>.<agent>` → `jobs.run`): low cardinality. */
function subjectKind(subject: string): string {
  const parts = subject.split('.');
  const i = parts.findIndex((p) => p === 'events' || p === 'triggers' || p === 'jobs');
  return i < 0 ? (parts[0] ?? subject) : parts[i] === 'jobs' ? `jobs.${parts[i + 1] ?? ''}` : (parts[i] as string);
}

/** JetStream's error code for a stream that failed to store a message (JSStreamStoreFailedF). */
export const STREAM_STORE_FAILED = 10077;

/** A PubAck that reported an error (or a no-responders / error status instead of a PubAck). */
export class PublishError extends Error {
  /** The status (503: no stream took it, or the store failed). */
  readonly code: number;
  /** JetStream's own error code, when the PubAck had one (10077: the stream failed to store it). */
  readonly errCode: number | null;
  /** The stream that answered, when it said. */
  readonly stream: string | null;

  constructor(message: string, o: { code: number; errCode?: number | null; stream?: string | null }) {
    super(message);
    this.name = 'PublishError';
    this.code = o.code;
    this.errCode = o.errCode ?? null;
    this.stream = o.stream ?? null;
  }
}

/** A stream answered that it could not store the message: its storage on the server is broken (or full). */
export function isStoreFailure(err: unknown): err is PublishError & { stream: string } {
  return err instanceof PublishError && err.errCode === STREAM_STORE_FAILED && err.stream !== null;
}

export interface BatchPublisherOptions {
  /**
   * A stream answered a publish with a store failure (`isStoreFailure`). Called for every such
   * answer; a TopologyWatch's `storeFailed` decides when the stream is broken for good.
   */
  onStoreFailure?: (stream: string, err: PublishError) => void;
}

/**
 * Publishes a batch to JetStream and waits for every PubAck, through one reply-inbox
 * subscription. (`js.publish` makes a request object, a timer and an Error with a stack for
 * every message; at relay volumes that was a measurable share of the orchestrator's CPU.)
 */
export class BatchPublisher {
  private readonly prefix = createInbox();
  private readonly pending = new Map<string, (err: Error | null) => void>();
  private readonly sub: Subscription;
  private seq = 0;
  private readonly nc: NatsConnection;
  private readonly o: BatchPublisherOptions;

  constructor(nc: NatsConnection, o: BatchPublisherOptions = {}) {
    this.nc = nc;
    this.o = o;
    this.sub = nc.subscribe(`${this.prefix}.*`, { callback: (err, msg) => this.onReply(err, msg) });
  }

  private onReply(err: Error | null, msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length + 1);
    const done = this.pending.get(token);
    if (!done) return;
    this.pending.delete(token);
    if (err) return done(err);
    const code = msg.headers?.code ?? 0;
    if (code >= 300) return done(new PublishError(`JetStream publish failed: ${code} ${msg.headers?.description ?? ''}`.trim(), { code: Number(code) }));
    try {
      const ack = msg.json<{ stream?: string; error?: { code?: number; err_code?: number; description?: string } }>();
      if (!ack.error) return done(null);
      const err = new PublishError(`JetStream publish failed: ${ack.error.description ?? 'unknown error'}`, { code: ack.error.code ?? 500, errCode: ack.error.err_code ?? null, stream: ack.stream ?? null });
      done(err);
      if (isStoreFailure(err)) {
        try {
          this.o.onStoreFailure?.(err.stream, err);
        } catch {
          /* a listener's failure is not the publish's */
        }
      }
    } catch (e) {
      done(e as Error);
    }
  }

  /**
   * Publish all; resolves when every message is acknowledged (or was a duplicate). A core message
   * is sent in its place in the batch and counts as done once sent (`onAck` too).
   */
  async publishAll(messages: readonly OutMessage[], opts: { timeoutMs?: number; onAck?: () => void } = {}): Promise<void> {
    const tokens: string[] = [];
    const acks = messages.map((m) => {
      if (m.core) {
        try {
          this.nc.publish(m.subject, m.data, m.headers ? { headers: ownHeaders(m.headers) } : undefined);
          opts.onAck?.();
          return Promise.resolve();
        } catch (err) {
          return Promise.reject(err as Error);
        }
      }
      const token = String(++this.seq);
      tokens.push(token);
      const acked = new Promise<void>((resolve, reject) => {
        this.pending.set(token, (e) => {
          if (e) return reject(e);
          try {
            opts.onAck?.();
            resolve();
          } catch (hookErr) {
            reject(hookErr as Error);
          }
        });
      });
      const { h, span } = outHeaders(m);
      this.nc.publish(m.subject, m.data, { reply: `${this.prefix}.${token}`, headers: h });
      if (!span) return acked;
      return acked.then(
        () => span.end(),
        (e: unknown) => {
          failSpan(span, e);
          span.end();
          throw e;
        },
      );
    });
    let timer: NodeJS.Timeout | undefined;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no PubAck within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(acks), timeout]);
    } finally {
      clearTimeout(timer);
      for (const t of tokens) this.pending.delete(t);
    }
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
