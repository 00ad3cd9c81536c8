import { parseLiveTicks, readRelayed, type BusNames, type RelayedEvent } from '@baton/bus';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '@baton/runtime';

/** Wakes a stream; `relayed`: the relayed event that woke it (absent: a tick, or a message without a place). */
export type Wake = (relayed?: RelayedEvent) => void;

interface Registration {
  wake: Wake;
  /** Woken by steps' live ticks too (a stream that shows model turns and tool results). */
  steps: boolean;
}

interface Watched {
  regs: Set<Registration>;
  /**
   * The task's relayed transitions, while anything watches the task: those in `BATON_EVENTS` and
   * those the relay sends as signals (nobody is told of them durably). Both or neither.
   */
  events: [Subscription, Subscription] | null;
}

/**
 * Wakes SSE connections when their task has new events. The gateway subscribes to a task's
 * relayed transitions (its events subject and its signals subject) only while a stream watches
 * it, so NATS delivers none for tasks nobody watches. Steps come as live ticks, each naming many tasks (one message per writer per
 * 20 ms at most): the gateway subscribes to them only while some stream shows steps, and wakes
 * the streams of the tasks a tick names. A tick only says "task X moved": the connection then
 * reads Postgres from its own cursor, so a lost wake-up delays an event, never loses it. A
 * relayed event comes with its place in the log and its task's previous relayed event's
 * (`readRelayed`): a stream can show it without reading, when that is where it stands.
 */
export class SseHub {
  private readonly tasks = new Map<string, Watched>();
  /** The live ticks (steps of every task): while a stream that shows steps is registered. */
  private live: Subscription | null = null;
  private stepRegistrations = 0;
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
    this.syncLive();
  }

  get connected(): boolean {
    return this.nc !== null && !this.nc.isClosed();
  }

  get size(): number {
    let n = 0;
    for (const w of this.tasks.values()) n += w.regs.size;
    return n;
  }

  register(taskId: string, wake: Wake, opts: { steps?: boolean } = {}): () => void {
    let w = this.tasks.get(taskId);
    if (!w) this.tasks.set(taskId, (w = { regs: new Set(), events: null }));
    const r: Registration = { wake, steps: opts.steps ?? true };
    w.regs.add(r);
    if (r.steps) this.stepRegistrations++;
    this.sync(taskId, w);
    this.syncLive();
    const watched = w;
    let registered = true;
    return () => {
      if (!registered) return;
      registered = false;
      watched.regs.delete(r);
      if (r.steps) this.stepRegistrations--;
      this.sync(taskId, watched);
      this.syncLive();
      if (watched.regs.size === 0) this.tasks.delete(taskId);
    };
  }

  /** Hold the task's events subscription exactly while something watches it. */
  private sync(taskId: string, w: Watched): void {
    const nc = this.nc;
    if (!nc || nc.isClosed()) return;
    if (w.regs.size > 0 && !w.events) {
      const wake = (err: Error | null, m: Msg): void => {
        if (err) return this.log.warn({ err, taskId }, 'sse hub subscription error');
        const relayed = readRelayed(m) ?? undefined;
        for (const r of w.regs) r.wake(relayed);
      };
      w.events = [nc.subscribe(this.names.taskEvents(taskId), { callback: wake }), nc.subscribe(this.names.taskSignals(taskId), { callback: wake })];
    }
    if (w.regs.size === 0 && w.events) {
      for (const s of w.events) s.unsubscribe();
      w.events = null;
    }
  }

  /** Hold the live-ticks subscription exactly while a stream shows steps. */
  private syncLive(): void {
    const nc = this.nc;
    if (!nc || nc.isClosed()) return;
    if (this.stepRegistrations > 0 && !this.live) {
      this.live = nc.subscribe(this.names.liveTicks, {
        callback: (err, m) => {
          if (err) return this.log.warn({ err }, 'sse hub live ticks subscription error');
          const ticks = parseLiveTicks(m.data);
          if (!ticks.ok) {
            // Someone's steps moved, and we cannot tell whose: every stream that shows steps reads (from its cursor, so nothing is shown twice).
            this.log.warn({ subject: m.subject, error: ticks.error }, 'live tick refused (waking every stream that shows steps)');
            for (const w of this.tasks.values()) wakeSteps(w);
            return;
          }
          for (const taskId of ticks.taskIds) {
            const w = this.tasks.get(taskId);
            if (w) wakeSteps(w);
          }
        },
      });
    }
    if (this.stepRegistrations === 0 && this.live) {
      this.live.unsubscribe();
      this.live = null;
    }
  }

  close(): void {
    for (const w of this.tasks.values()) {
      for (const s of w.events ?? []) s.unsubscribe();
      w.events = null;
    }
    this.live?.unsubscribe();
    this.live = null;
    this.nc = null;
  }
}

function wakeSteps(w: Watched): void {
  for (const r of w.regs) if (r.steps) r.wake();
}
