import type { BusNames } from '@baton/bus';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '@baton/runtime';

interface Registration {
  wake: () => void;
  /** Woken by steps' live ticks too (a stream that shows model turns and tool results). */
  steps: boolean;
}

/**
 * Wakes SSE connections when their task has new events. Core NATS subscriptions for the whole
 * gateway (relayed transitions, and the live ticks writers send for steps); a message only says
 * "task X moved" — the connection then reads Postgres from its own cursor, so a lost wake-up
 * delays an event, never loses it.
 */
export class SseHub {
  private readonly conns = new Map<string, Set<Registration>>();
  private subs: Subscription[] = [];
  private readonly names: BusNames;
  private readonly log: Logger;
  constructor(names: BusNames, log: Logger) {
    this.names = names;
    this.log = log;
  }

  attach(nc: NatsConnection): void {
    // Transitions arrive as the relay publishes them; steps as the writers' live ticks (which
    // wake only the streams that show steps).
    this.subs = [
      { subject: this.names.allEvents, step: false },
      { subject: this.names.allLive, step: true },
    ].map(({ subject, step }) =>
      nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err) return this.log.warn({ err }, 'sse hub subscription error');
          const taskId = msg.subject.split('.')[this.names.taskIdToken];
          if (taskId) for (const r of this.conns.get(taskId) ?? []) if (!step || r.steps) r.wake();
        },
      }),
    );
  }

  get connected(): boolean {
    return this.subs.length > 0 && this.subs.every((s) => !s.isClosed());
  }

  get size(): number {
    let n = 0;
    for (const s of this.conns.values()) n += s.size;
    return n;
  }

  register(taskId: string, wake: () => void, opts: { steps?: boolean } = {}): () => void {
    let set = this.conns.get(taskId);
    if (!set) this.conns.set(taskId, (set = new Set()));
    const r: Registration = { wake, steps: opts.steps ?? true };
    set.add(r);
    return () => {
      set.delete(r);
      if (set.size === 0) this.conns.delete(taskId);
    };
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }
}
