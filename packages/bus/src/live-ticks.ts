/**
 * A task's live tick (the core-NATS message that wakes its live views, which then read
 * Postgres) at most once per `gapMs`: the first at once, the ones that follow within the gap
 * folded into one trailing tick at its end. A view therefore sees every step, about `gapMs`
 * late at worst (a timer: later on a busy event loop), and a run of steps costs one send per
 * gap instead of one per step (each a socket write in the writer and a wake-up of the NATS
 * server, whether or not anyone watches).
 */

/** When a tick asked for at `now` goes out: 0 for at once, else the delay until the gap ends. */
export function tickDelay(now: number, lastSentAt: number | undefined, gapMs: number): number {
  if (lastSentAt === undefined) return 0;
  const since = now - lastSentAt;
  return since >= gapMs ? 0 : gapMs - since;
}

export class LiveTicks {
  private readonly lastSent = new Map<string, number>();
  /** The trailing tick due for a key: its timer, and the send (`flush` makes it early). */
  private readonly trailing = new Map<string, { timer: NodeJS.Timeout; send: () => void }>();
  private readonly gapMs: number;
  private readonly now: () => number;

  constructor(gapMs: number, now: () => number = () => performance.now()) {
    this.gapMs = gapMs;
    this.now = now;
  }

  /** Ask for a tick of `key`; `send` makes it (called at once, or once at the end of the gap). */
  tick(key: string, send: () => void): void {
    if (this.trailing.has(key)) return; // a tick is due already: it will show this step too
    const now = this.now();
    const delay = tickDelay(now, this.lastSent.get(key), this.gapMs);
    if (delay === 0) {
      this.sent(key, now);
      send();
      return;
    }
    const timer = setTimeout(() => this.sendTrailing(key), delay);
    timer.unref(); // a process that exits loses at most a tick: live views also poll (drainNats flushes them)
    this.trailing.set(key, { timer, send });
  }

  /** Send every trailing tick now (before a connection is drained: a view would wait for its backstop poll). */
  flush(): void {
    for (const key of [...this.trailing.keys()]) this.sendTrailing(key);
  }

  /** Keys with a trailing tick due (for tests and diagnostics). */
  get due(): number {
    return this.trailing.size;
  }

  private sendTrailing(key: string): void {
    const due = this.trailing.get(key);
    if (!due) return;
    clearTimeout(due.timer);
    this.trailing.delete(key);
    this.sent(key, this.now());
    due.send();
  }

  private sent(key: string, at: number): void {
    this.lastSent.delete(key); // re-inserted last: the map stays in order of sending
    this.lastSent.set(key, at);
    // Forget keys whose gap is over (they would tick at once anyway): oldest first, so this stops early.
    for (const [k, t] of this.lastSent) {
      if (at - t < this.gapMs) break;
      this.lastSent.delete(k);
    }
  }
}
