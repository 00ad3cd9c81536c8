import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/nats-core';

export interface OutMessage {
  subject: string;
  data: Uint8Array | string;
  /** Nats-Msg-Id: JetStream drops a second message with the same id within its dedupe window. */
  msgId: string;
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

  constructor(nc: NatsConnection) {
    this.nc = nc;
    this.sub = nc.subscribe(`${this.prefix}.*`, { callback: (err, msg) => this.onReply(err, msg) });
  }

  private onReply(err: Error | null, msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length + 1);
    const done = this.pending.get(token);
    if (!done) return;
    this.pending.delete(token);
    if (err) return done(err);
    const code = msg.headers?.code ?? 0;
    if (code >= 300) return done(new Error(`JetStream publish failed: ${code} ${msg.headers?.description ?? ''}`.trim()));
    try {
      const ack = msg.json<{ error?: { description?: string } }>();
      done(ack.error ? new Error(`JetStream publish failed: ${ack.error.description ?? 'unknown error'}`) : null);
    } catch (e) {
      done(e as Error);
    }
  }

  /** Publish all; resolves when every message is acknowledged (or was a duplicate). */
  async publishAll(messages: readonly OutMessage[], opts: { timeoutMs?: number; onAck?: () => void } = {}): Promise<void> {
    const tokens: string[] = [];
    const acks = messages.map((m) => {
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
      const h = headers();
      h.set('Nats-Msg-Id', m.msgId);
      this.nc.publish(m.subject, m.data, { reply: `${this.prefix}.${token}`, headers: h });
      return acked;
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
