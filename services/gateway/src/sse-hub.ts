import type { BusNames } from '@baton/bus';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '@baton/runtime';

/**
 * Wakes SSE connections when their task has new events. One core NATS subscription for the
 * whole gateway; a message only says "task X moved" — the connection then reads Postgres from
 * its own cursor, so a lost wake-up delays an event, never loses it.
 */
export class SseHub {
  private readonly conns = new Map<string, Set<() => void>>();
  private sub: Subscription | null = null;
  private readonly names: BusNames;
  private readonly log: Logger;
  constructor(names: BusNames, log: Logger) {
    this.names = names;
    this.log = log;
  }

  attach(nc: NatsConnection): void {
    this.sub = nc.subscribe(this.names.allEvents, {
      callback: (err, msg) => {
        if (err) return this.log.warn({ err }, 'sse hub subscription error');
        const taskId = msg.subject.split('.')[this.names.taskIdToken];
        if (taskId) for (const wake of this.conns.get(taskId) ?? []) wake();
      },
    });
  }

  get connected(): boolean {
    return this.sub !== null && !this.sub.isClosed();
  }

  get size(): number {
    let n = 0;
    for (const s of this.conns.values()) n += s.size;
    return n;
  }

  register(taskId: string, wake: () => void): () => void {
    let set = this.conns.get(taskId);
    if (!set) this.conns.set(taskId, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.conns.delete(taskId);
    };
  }

  close(): void {
    this.sub?.unsubscribe();
    this.sub = null;
  }
}
