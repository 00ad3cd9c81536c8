import { TERMINAL_EVENT_TYPES, type RecordedEvent } from '@baton/domain';
import { setBounded } from '@baton/runtime';
import type pg from 'pg';

/**
 * Who must be told of a transition durably. The notifier is the only durable consumer of
 * events (the orchestrator takes triggers, the runner jobs): it serves a task that has a webhook
 * or mail recipients of its own, or whose tenant has webhook endpoints, and every agent's outbox
 * mail (`EmailRequested`). Any other transition only wakes live views, so the relay sends it as
 * a core-NATS signal instead of storing it in `BATON_EVENTS` and having the notifier take and
 * acknowledge it (docs/benchmarks.md, "Transitions nobody is told of durably").
 */

/** The rule (the relay's audience applies it): must the notifier get this event? `tenantHasEndpoints` undefined: not known (yet), so yes. */
export function mayNotify(type: string, task: { ownTargets: boolean; tenantHasEndpoints: boolean | undefined } | undefined): boolean {
  if (type === 'EmailRequested') return true; // an agent's outbox mail, for any task
  if (!task) return true;
  return task.ownTargets || task.tenantHasEndpoints !== false;
}

/** Does a task's submission name somewhere to send its news (a webhook, mail recipients)? */
export const hasOwnTargets = (submitted: { webhook?: unknown; notify?: unknown }): boolean => (submitted.webhook ?? null) !== null || (submitted.notify ?? null) !== null;

export interface NotifierAudienceOptions {
  /** The tenants that have at least one webhook endpoint (POST /v1/webhooks), read on `db` (the relay's own session). */
  tenantsWithEndpoints: (db: Pick<pg.Pool, 'query'>) => Promise<Iterable<string>>;
  /** Re-read that list when it is older than this (default 5000 ms, as the notifier's own cache of a tenant's endpoints). */
  refreshMs?: number;
  /** Tasks remembered at most (default 100,000; the oldest are forgotten first, and a forgotten task counts as served). */
  maxTasks?: number;
  now?: () => number;
  /** Told when the list could not be read (everything counts as served until it can). */
  onRefreshError?: (err: unknown) => void;
  /** A Postgres channel announcing changes to the list (the relay LISTENs on it and calls `invalidate`). */
  channel?: string;
}

/**
 * The relay's view of whom the notifier serves. It learns a task's own targets from its
 * `TaskSubmitted` (the relay reads a task's submission before any other transition of it) and
 * forgets the task at its final event; a task it does not know — submitted before this process
 * led the relay, or forgotten — is served, as is everything while the tenant list cannot be read.
 * The list is read again when `invalidate` is called (the relay does when Postgres announces a
 * change on `channel`, and whenever it starts to lead) and at the latest after `refreshMs`.
 */
export class NotifierAudience {
  private readonly o: Required<Omit<NotifierAudienceOptions, 'onRefreshError' | 'channel'>> & Pick<NotifierAudienceOptions, 'onRefreshError' | 'channel'>;
  /** taskId → tenant and whether it has targets of its own. */
  private readonly tasks = new Map<string, { tenantId: string; ownTargets: boolean }>();
  private tenants: ReadonlySet<string> | null = null;
  private readAt = Number.NEGATIVE_INFINITY;
  /** Moved by `invalidate`: a read that was under way when it moved does not count as fresh. */
  private generation = 0;
  /** After a failed read: not before this (everything is served meanwhile). */
  private retryAt = Number.NEGATIVE_INFINITY;

  constructor(o: NotifierAudienceOptions) {
    this.o = { refreshMs: 5000, maxTasks: 100_000, now: () => Date.now(), ...o };
  }

  get channel(): string | undefined {
    return this.o.channel;
  }

  /** The list changed (or may have, unheard): read it again before the next decision. */
  invalidate(): void {
    this.generation++;
    this.readAt = Number.NEGATIVE_INFINITY;
  }

  /**
   * Before deciding a batch: re-read the tenants with endpoints if the list is older than
   * `refreshMs` or was invalidated (a read under way when it was is not fresh). Never throws: a
   * failed read is told, everything is served, and the read is tried again after a second
   * (or `refreshMs`, if shorter).
   */
  async refresh(db: Pick<pg.Pool, 'query'>): Promise<void> {
    const at = this.o.now();
    if (this.tenants ? at - this.readAt < this.o.refreshMs : at < this.retryAt) return;
    const generation = this.generation;
    try {
      this.tenants = new Set(await this.o.tenantsWithEndpoints(db));
      this.readAt = generation === this.generation ? at : Number.NEGATIVE_INFINITY;
    } catch (err) {
      this.tenants = null;
      this.retryAt = this.o.now() + Math.min(1000, this.o.refreshMs); // from the failure: a read that failed slowly is not tried again at once
      this.o.onRefreshError?.(err);
    }
  }

  /** Learn from the event (in log order), then: must the notifier get it? */
  serves(e: RecordedEvent): boolean {
    if (e.type === 'TaskSubmitted') {
      setBounded(this.tasks, e.taskId, { tenantId: e.data.tenantId, ownTargets: hasOwnTargets(e.data) }, this.o.maxTasks);
    }
    const task = this.tasks.get(e.taskId);
    if (TERMINAL_EVENT_TYPES.has(e.type)) this.tasks.delete(e.taskId);
    return mayNotify(e.type, task && { ownTargets: task.ownTargets, tenantHasEndpoints: this.tenants ? this.tenants.has(task.tenantId) : undefined });
  }

  /** Tasks remembered now (for tests and diagnostics). */
  get size(): number {
    return this.tasks.size;
  }
}
