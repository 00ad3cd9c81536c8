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
   * The task's own subscriptions to its relayed transitions (per-task mode), while anything
   * watches the task: those in `BATON_EVENTS` and those the relay sends as signals (nobody is
   * told of them durably). Both or neither.
   */
  events: [Subscription, Subscription] | null;
}

/**
 * How the hub hears of watched tasks' transitions. `all`: one subscription to every task's
 * (events and signals), dispatched by the task id in the subject — watching a task costs NATS
 * nothing, and transitions of tasks nobody watches are delivered for nothing. `per-task`: a
 * subscription pair per watched task — two SUBs when a stream opens and two UNSUBs when it ends
 * (two socket writes, each waking the NATS server), and nothing delivered for nothing.
 */
export type HubMode = 'all' | 'per-task';

/**
 * The waste `all` may cause per task it watched in the same window before `per-task` is cheaper:
 * a watched task costs `per-task` four protocol operations in two socket writes, a delivery
 * nobody needed costs `all` one delivery (read in batches when they come fast).
 */
export const WASTE_PER_WATCH = 4;
/** Deliveries nobody needed after which `all` checks whether it still pays (the window). */
export const WASTE_WINDOW = 256;
/** How long the hub stays `per-task` once `all` did not pay, before it tries `all` again. */
export const PER_TASK_COOLDOWN_MS = 60_000;

/** Whether one subscription to every task's transitions paid over a window: at most WASTE_PER_WATCH deliveries nobody needed per task watched. */
export function allPays(window: { wasted: number; watched: number }): boolean {
  return window.wasted <= WASTE_PER_WATCH * window.watched;
}

export interface SseHubOptions {
  /** How long `per-task` lasts once `all` did not pay (PER_TASK_COOLDOWN_MS). */
  cooldownMs?: number;
  now?: () => number;
}

/**
 * Wakes SSE connections when their task has new events. Transitions come relayed (events and
 * signals), in one of two modes (`HubMode`): the hub starts with one subscription to every
 * task's, held from the first stream on, which costs nothing per stream — the common case of
 * clients that follow the tasks they submit; when, over a window, it delivers more than
 * WASTE_PER_WATCH transitions nobody watches per task watched (a console open on one task while
 * thousands run, or many gateway replicas), it moves to a subscription per watched task for a
 * cooldown, then tries again. Steps come as live ticks, each naming many tasks (one message per
 * writer per 20 ms at most): the gateway subscribes to them only while some stream shows steps,
 * and wakes the streams of the tasks a tick names. A tick only says "task X moved": the
 * connection then reads Postgres from its own cursor, so a lost wake-up (or one delivered twice,
 * as when the mode changes) delays an event, never loses or repeats it. A relayed event comes
 * with its place in the log and its task's previous relayed event's (`readRelayed`): a stream
 * can show it without reading, when that is where it stands.
 */
export class SseHub {
  private readonly tasks = new Map<string, Watched>();
  /** The live ticks (steps of every task): while a stream that shows steps is registered. */
  private live: Subscription | null = null;
  private stepRegistrations = 0;
  private nc: NatsConnection | null = null;
  private readonly names: BusNames;
  private readonly log: Logger;
  private readonly cooldownMs: number;
  private readonly now: () => number;
  private modeNow: HubMode = 'all';
  private perTaskUntil = 0;
  /** Every task's transitions (mode `all`), from the first registration on. */
  private every: [Subscription, Subscription] | null = null;
  /** The current window of mode `all`. */
  private window = { wasted: 0, watched: 0 };
  /** Listeners of every task's transitions (task lists that follow changes): while any listens, the hub stays in mode `all`. */
  private readonly everyListeners = new Set<(taskId: string) => void>();
  constructor(names: BusNames, log: Logger, opts: SseHubOptions = {}) {
    this.names = names;
    this.log = log;
    this.cooldownMs = opts.cooldownMs ?? PER_TASK_COOLDOWN_MS;
    this.now = opts.now ?? Date.now;
  }

  attach(nc: NatsConnection): void {
    this.nc = nc;
    this.syncMode();
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

  /** Tasks some stream watches. */
  get watchedTasks(): number {
    return this.tasks.size;
  }

  /** How transitions reach the hub now (tests, diagnostics). */
  get mode(): HubMode {
    return this.modeNow;
  }

  register(taskId: string, wake: Wake, opts: { steps?: boolean } = {}): () => void {
    let w = this.tasks.get(taskId);
    if (!w) this.tasks.set(taskId, (w = { regs: new Set(), events: null }));
    const r: Registration = { wake, steps: opts.steps ?? true };
    w.regs.add(r);
    if (w.regs.size === 1) this.window.watched++;
    if (r.steps) this.stepRegistrations++;
    if (this.modeNow === 'per-task' && this.now() >= this.perTaskUntil) this.setMode('all');
    this.syncMode();
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

  /**
   * Hear of every task's transitions (the task id of each): a list that follows changes. While
   * any listens, the hub is in mode `all` (what it is delivered is then never waste: the list
   * hears it). Returns the way to stop listening.
   */
  watchAll(listener: (taskId: string) => void): () => void {
    this.everyListeners.add(listener);
    // Every task's transitions come anyway: the watched tasks' own subscriptions would be paid for twice.
    if (this.modeNow === 'per-task') this.setMode('all');
    this.syncMode();
    let listening = true;
    return () => {
      if (!listening) return;
      listening = false;
      this.everyListeners.delete(listener);
      // What came while a list listened was no waste: the window starts afresh.
      if (this.everyListeners.size === 0) this.window = { wasted: 0, watched: this.tasks.size };
    };
  }

  /** Listeners of every task's transitions (diagnostics, tests). */
  get listeningToAll(): number {
    return this.everyListeners.size;
  }

  private setMode(mode: HubMode): void {
    if (mode === this.modeNow) return;
    this.modeNow = mode;
    this.window = { wasted: 0, watched: 0 };
    // Logged at debug: with several gateway replicas this may happen once a minute (the mode is in the diagnostics).
    if (mode === 'per-task') {
      this.perTaskUntil = this.now() + this.cooldownMs;
      this.log.debug({ mode, cooldownMs: this.cooldownMs, watchedTasks: this.tasks.size }, 'sse hub: a subscription per watched task for a while (most transitions delivered were of tasks nobody watched)');
    } else this.log.debug({ mode }, "sse hub: one subscription to every task's transitions again");
    // Subscribe the new way before dropping the old: a transition in between is delivered twice at worst.
    this.syncMode();
    for (const [taskId, w] of this.tasks) this.sync(taskId, w);
    if (mode === 'per-task') this.dropEvery();
  }

  /**
   * Mode `all` (which a list listening with `watchAll` keeps): hold the subscription to every
   * task's transitions from the first registration or listener on.
   */
  private syncMode(): void {
    const nc = this.nc;
    if (!nc || nc.isClosed() || this.every || this.modeNow !== 'all' || (this.tasks.size === 0 && this.everyListeners.size === 0)) return;
    const deliver = (err: Error | null, m: Msg): void => {
      if (err) return this.log.warn({ err }, 'sse hub subscription error');
      const taskId = this.names.taskOfTransition(m.subject);
      if (taskId !== null) for (const l of this.everyListeners) l(taskId);
      const w = taskId === null ? undefined : this.tasks.get(taskId);
      if (w) return wakeTransition(w, m);
      if (this.everyListeners.size > 0) return; // not for nothing: a list follows every task
      this.window.wasted++;
      if (this.window.wasted < WASTE_WINDOW) return;
      if (allPays(this.window)) this.window = { wasted: 0, watched: 0 };
      else this.setMode('per-task');
    };
    this.every = [nc.subscribe(this.names.allEvents, { callback: deliver }), nc.subscribe(this.names.allSignals, { callback: deliver })];
  }

  private dropEvery(): void {
    for (const s of this.every ?? []) s.unsubscribe();
    this.every = null;
  }

  /** Mode `per-task`: hold the task's subscriptions exactly while something watches it (in mode `all`, none). */
  private sync(taskId: string, w: Watched): void {
    const nc = this.nc;
    if (!nc || nc.isClosed()) return;
    if (this.modeNow === 'per-task' && w.regs.size > 0 && !w.events) {
      const wake = (err: Error | null, m: Msg): void => {
        if (err) return this.log.warn({ err, taskId }, 'sse hub subscription error');
        wakeTransition(w, m);
      };
      w.events = [nc.subscribe(this.names.taskEvents(taskId), { callback: wake }), nc.subscribe(this.names.taskSignals(taskId), { callback: wake })];
    }
    if ((this.modeNow === 'all' || w.regs.size === 0) && w.events) {
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
    this.dropEvery();
    for (const w of this.tasks.values()) {
      for (const s of w.events ?? []) s.unsubscribe();
      w.events = null;
    }
    this.live?.unsubscribe();
    this.live = null;
    this.nc = null;
  }
}

/** A relayed transition of a watched task: every stream of the task, handed the event when the message carries its place. */
function wakeTransition(w: Watched, m: Msg): void {
  const relayed = readRelayed(m) ?? undefined;
  for (const r of w.regs) r.wake(relayed);
}

function wakeSteps(w: Watched): void {
  for (const r of w.regs) if (r.steps) r.wake();
}
