import { toPendingRequestView, type PendingRequestView } from '@baton/api';
import { cutText, hasMachineWork, isFinal, nextDeadline, type TaskState, type TaskStatus } from '@baton/domain';

/** A row of the `tasks` read model: what lists and filters need, rebuilt from the log at will. */
export interface TaskRow {
  id: string;
  tenant_id: string;
  status: TaskStatus;
  team: string;
  title: string;
  created_at: string;
  updated_at: string;
  version: number;
  /** Open requests as the API shows them (the task list serves them as they are). */
  pending_requests: PendingRequestView[];
  /** The earliest deadline among open requests (the deadline poller's index). */
  next_deadline: string | null;
  /** Since when the task has work no person holds (null: final, or only people can move it): the watchdog's index. */
  watch_since: string | null;
  /** The task this one was forked from (null: not a fork), and the version it was copied at. */
  forked_from: string | null;
  forked_at_version: number | null;
}

export function toTaskRow(s: TaskState): TaskRow {
  if (s.status === 'none') throw new Error('toTaskRow: the task does not exist');
  return {
    id: s.id,
    tenant_id: s.tenantId,
    status: s.status,
    team: s.team,
    title: s.prompt.length > 200 ? `${cutText(s.prompt, 199)}…` : s.prompt,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    version: s.version,
    pending_requests: Object.values(s.pendingRequests).map(toPendingRequestView),
    next_deadline: isFinal(s) ? null : nextDeadline(s),
    watch_since: hasMachineWork(s) ? s.updatedAt : null,
    forked_from: s.forkedFrom?.taskId ?? null,
    forked_at_version: s.forkedFrom?.atVersion ?? null,
  };
}
