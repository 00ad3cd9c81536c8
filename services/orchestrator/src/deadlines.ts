import { uuidV5 } from '@baton/domain';
import { dueTasks, earliestDeadline, handleCommand, type EventStore, type TaskLoader } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import type pg from 'pg';

export interface DeadlineDeps {
  pool: pg.Pool;
  store: EventStore;
  load: TaskLoader;
  now: () => Date;
  log: Logger;
}

/**
 * Record the default action of every request whose deadline has passed (ApprovalTimedOut,
 * ClarificationTimedOut; a budget request's stops the run), from the deadline column of the `tasks` read model. The event id is
 * derived from the request, so two replicas firing the same deadline record it once.
 * Returns the number of requests timed out.
 */
export async function fireDueDeadlines(d: DeadlineDeps): Promise<number> {
  const now = d.now();
  let fired = 0;
  for (const taskId of await dueTasks(d.pool, now)) {
    try {
      const { state } = await d.load(taskId);
      for (const r of Object.values(state.pendingRequests)) {
        if (!r.deadline || Date.parse(r.deadline) > now.getTime()) continue;
        const res = await handleCommand(d.store, taskId, { type: r.kind === 'clarification' ? 'TimeOutClarification' : 'TimeOutApproval', requestId: r.requestId }, {
          load: d.load,
          eventIds: [uuidV5(`${taskId}:deadline:${r.requestId}`)],
          metadata: { actor: 'baton:deadline' },
          now: d.now,
        });
        fired += res.events.length;
      }
    } catch (err) {
      d.log.error({ err, taskId }, 'deadline: could not record the timeout; will retry');
    }
  }
  return fired;
}

/**
 * One timer per process, not one per waiting task: it sleeps until the earliest deadline in
 * the table (or `backstopMs`, whichever is sooner), fires what is due, and looks again. When
 * this process opens a request it calls `hint(deadline)` so an earlier deadline is not missed;
 * requests opened elsewhere are found at the next look (at most `backstopMs` later).
 */
export class DeadlinePoller {
  private timer: NodeJS.Timeout | null = null;
  private wakeAt = Number.POSITIVE_INFINITY;
  private running: Promise<void> | null = null;
  private stopped = false;
  private rerun = false;
  private readonly d: DeadlineDeps & { backstopMs: number };

  constructor(d: DeadlineDeps & { backstopMs: number }) {
    this.d = d;
  }

  start(): void {
    this.schedule(Date.now());
  }

  /** A request with this deadline was opened: wake by then. */
  hint(deadline: string | Date | null | undefined): void {
    if (!deadline || this.stopped) return;
    const at = typeof deadline === 'string' ? Date.parse(deadline) : deadline.getTime();
    if (at < this.wakeAt) this.schedule(at);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(at: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.wakeAt = at;
    // The wall clock may differ from the injected `now` in tests; the look itself uses `now`.
    this.timer = setTimeout(() => void this.tick(), Math.max(0, Math.min(at - Date.now(), this.d.backstopMs)));
  }

  private async tick(): Promise<void> {
    this.timer = null;
    this.wakeAt = Number.POSITIVE_INFINITY;
    if (this.stopped) return;
    if (this.running) {
      this.rerun = true;
      return;
    }
    let next = Date.now() + this.d.backstopMs;
    this.running = (async () => {
      try {
        const fired = await fireDueDeadlines(this.d);
        if (fired > 0) this.d.log.info({ fired }, 'deadline: requests timed out');
        const earliest = await earliestDeadline(this.d.pool);
        // A deadline still due after the look failed for that task: retry it, but not in a tight loop.
        if (earliest) next = Math.max(Math.min(next, earliest.getTime()), Date.now() + 100);
      } catch (err) {
        this.d.log.error({ err }, 'deadline: look failed; retrying');
        next = Date.now() + 1000;
      }
    })();
    await this.running;
    this.running = null;
    if (this.rerun) {
      this.rerun = false;
      next = Date.now();
    }
    // A hint that arrived during the look may already have scheduled an earlier wake.
    if (next < this.wakeAt) this.schedule(next);
  }
}
