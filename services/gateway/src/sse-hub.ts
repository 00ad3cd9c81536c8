import type { BusNames } from '@baton/bus';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '@baton/runtime';

interface Registration {
  wake: () => void;
  /** Woken by steps' live ticks too (a stream that shows model turns and tool results). */
  steps: boolean;
}

interface Watched {
  regs: Set<Registration>;
  /** The task's relayed events (transitions): while anything watches the task. */
  events: Subscription | null;
  /** The task's live ticks (steps): while a stream that shows steps watches it. */
  live: Subscription | null;
}

/**
 * Wakes SSE connections when their task has new events. The gateway subscribes to a task's
 * subjects only while a stream watches it — its relayed events, and the live ticks writers send
 * for steps only while a stream wants steps — so NATS delivers nothing for tasks nobody watches.
 * A message only says "task X moved": the connection then reads Postgres from its own cursor, so
 * a lost wake-up delays an event, never loses it.
 */
export class SseHub {
  private readonly tasks = new Map<string, Watched>();
  private nc: NatsConnection | null = null;
  private readonly names: BusNames;
  private readonly log: Logger;
  constructor(names: BusNames, log: Logger) {
    this.names = names;
    this.log = log;
  }

  attach(nc: NatsConnection): void {
    this.nc = nc;
    for (const [taskId, w] of this.tasks) this.sync(taskId, w);
  }

  get connected(): boolean {
    return this.nc !== null && !this.nc.isClosed();
  }

  get size(): number {
    let n = 0;
    for (const w of this.tasks.values()) n += w.regs.size;
    return n;
  }

  register(taskId: string, wake: () => void, opts: { steps?: boolean } = {}): () => void {
    let w = this.tasks.get(taskId);
    if (!w) this.tasks.set(taskId, (w = { regs: new Set(), events: null, live: null }));
    const r: Registration = { wake, steps: opts.steps ?? true };
    w.regs.add(r);
    this.sync(taskId, w);
    const watched = w;
    return () => {
      watched.regs.delete(r);
      this.sync(taskId, watched);
      if (watched.regs.size === 0) this.tasks.delete(taskId);
    };
  }

  /** Hold exactly the subscriptions the task's registrations need. */
  private sync(taskId: string, w: Watched): void {
    const nc = this.nc;
    if (!nc || nc.isClosed()) return;
    const wantSteps = [...w.regs].some((r) => r.steps);
    const subscribe = (subject: string, steps: boolean): Subscription =>
      nc.subscribe(subject, {
        callback: (err) => {
          if (err) return this.log.warn({ err, taskId }, 'sse hub subscription error');
          for (const r of w.regs) if (!steps || r.steps) r.wake();
        },
      });
    if (w.regs.size > 0 && !w.events) w.events = subscribe(this.names.taskEvents(taskId), false);
    if (w.regs.size === 0 && w.events) {
      w.events.unsubscribe();
      w.events = null;
    }
    if (wantSteps && !w.live) w.live = subscribe(this.names.liveSubject(taskId), true);
    if (!wantSteps && w.live) {
      w.live.unsubscribe();
      w.live = null;
    }
  }

  close(): void {
    for (const w of this.tasks.values()) {
      w.events?.unsubscribe();
      w.live?.unsubscribe();
      w.events = w.live = null;
    }
    this.nc = null;
  }
}
