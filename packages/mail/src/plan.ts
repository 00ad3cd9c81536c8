import { createHash } from 'node:crypto';
import { notifiesAnyone, type MailMoment, type PendingRequest, type TaskState } from '@baton/domain';

/**
 * Which mails an event makes (docs/email.md), pure. A request that opens (approval, question,
 * budget) mails each `notify.email.to` address if the task asked for `awaiting_input` and the
 * request is still open; the task's end mails them if it asked for that moment; an agent's
 * EmailRequested is one mail to its recipients (the outbox). Events a fork copied make none, but
 * for a request it reopened (still open at the fork point: `notifiesAnyone`).
 * Each mail has a key, unique per task and recipient: what the mail ledger claims.
 */
export type PlannedMail =
  | { kind: 'request'; moment: 'awaiting_input'; key: string; recipient: string; request: PendingRequest }
  | { kind: 'end'; moment: Exclude<MailMoment, 'awaiting_input'>; key: string; recipient: string }
  | { kind: 'outbox'; moment: 'outbox'; key: string; recipient: string; to: string[]; emailId: string };

const END_MOMENTS: Partial<Record<string, Exclude<MailMoment, 'awaiting_input'>>> = { TaskCompleted: 'completed', TaskFailed: 'failed', TaskCancelled: 'cancelled' };
const REQUEST_EVENTS = new Set(['ApprovalRequested', 'ClarificationRequested', 'BudgetExceeded']);
/** The event types that can make a mail. */
export const MAIL_EVENT_TYPES: ReadonlySet<string> = new Set([...REQUEST_EVENTS, ...Object.keys(END_MOMENTS), 'EmailRequested']);

export function plannedMails(event: { type: string; data: unknown; metadata?: unknown }, state: TaskState): PlannedMail[] {
  if (!notifiesAnyone(event)) return [];
  if (event.type === 'EmailRequested') {
    const d = event.data as { emailId: string; to: string[] };
    return [{ kind: 'outbox', moment: 'outbox', key: `email:${d.emailId}`, recipient: d.to.join(', '), to: d.to, emailId: d.emailId }];
  }
  const notify = state.notify?.email;
  if (!notify) return [];
  if (REQUEST_EVENTS.has(event.type)) {
    const request = state.pendingRequests[(event.data as { requestId: string }).requestId];
    if (!request || !notify.on.includes('awaiting_input')) return [];
    return notify.to.map((recipient) => ({ kind: 'request', moment: 'awaiting_input', key: `request:${request.requestId}`, recipient, request }));
  }
  const moment = END_MOMENTS[event.type];
  if (!moment || !notify.on.includes(moment)) return [];
  return notify.to.map((recipient) => ({ kind: 'end', moment, key: moment, recipient }));
}

/** A mail's stable ids: its delivery id (`mail_…`, in the delivery list) and its Message-ID, the same on every attempt. */
export function mailIds(taskId: string, key: string, recipient: string, domain: string): { deliveryId: string; messageId: string } {
  const h = createHash('sha256').update(`${taskId}\n${key}\n${recipient}`).digest('hex').slice(0, 32);
  return { deliveryId: `mail_${h}`, messageId: `<${h}@${domain}>` };
}
