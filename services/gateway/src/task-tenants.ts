import { setBounded } from '@baton/runtime';

/**
 * The tenant of tasks this gateway has seen: submitted here, or looked up for an event stream. A
 * task's tenant never changes (it is in its first event, and the log is append-only), so an entry
 * is never stale; the oldest go first beyond `max`. An event stream then opens with one statement
 * (its first read) instead of two for a task submitted here.
 */
export class TaskTenants {
  private readonly byTask = new Map<string, string>();
  private readonly max: number;
  constructor(max = 10_000) {
    this.max = max;
  }

  get(taskId: string): string | undefined {
    return this.byTask.get(taskId);
  }

  remember(taskId: string, tenant: string): void {
    if (!this.byTask.has(taskId)) setBounded(this.byTask, taskId, tenant, this.max);
  }

  get size(): number {
    return this.byTask.size;
  }
}
