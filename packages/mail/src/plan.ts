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
  const to = distinctAddresses(notify.to);
  if (REQUEST_EVENTS.has(event.type)) {
    const request = state.pendingRequests[(event.data as { requestId: string }).requestId];
    if (!request || !notify.on.includes('awaiting_input')) return [];
    return to.map((recipient) => ({ kind: 'request', moment: 'awaiting_input', key: `request:${request.requestId}`, recipient, request }));
  }
  const moment = END_MOMENTS[event.type];
  if (!moment || !notify.on.includes(moment)) return [];
  return to.map((recipient) => ({ kind: 'end', moment, key: moment, recipient }));
}

/**
 * The mail key of a request an event opened that has closed since (decided, timed out, the task
 * ended): its mail is not sent any more (`plannedMails` plans none), but a claim of it that a
 * notifier left when it stopped must still be settled. Null for any other event. Pure.
 */
export function closedRequestMailKey(event: { type: string; data: unknown }, state: TaskState): string | null {
  if (!REQUEST_EVENTS.has(event.type)) return null;
  const requestId = (event.data as { requestId?: unknown }).requestId;
  return typeof requestId === 'string' && !state.pendingRequests[requestId] ? `request:${requestId}` : null;
}

/** Addresses once each, whatever their letters' case (`Ann@Example.com` is `ann@example.com`: one mail), the first spelling kept. Pure. */
export function distinctAddresses(addresses: readonly string[]): string[] {
  const seen = new Set<string>();
  return addresses.filter((a) => !seen.has(a.toLowerCase()) && seen.add(a.toLowerCase()));
}

/** A mail's stable ids: its delivery id (`mail_…`, in the delivery list) and its Message-ID, the same on every automatic attempt (a redelivery's is its own). */
export function mailIds(taskId: string, key: string, recipient: string, domain: string, redeliveryId?: string): { deliveryId: string; messageId: string } {
  const h = createHash('sha256').update(`${taskId}\n${key}\n${recipient}`).digest('hex').slice(0, 32);
  // A mail sent again at a person's asking is a new message (new links, the state as it is now):
  // its own Message-ID, or a client that drops a repeated one hides the mail with working links.
  return { deliveryId: `mail_${h}`, messageId: `<${h}${redeliveryId ? `.r${redeliveryId}` : ''}@${domain}>` };
}

/** What a recorded mail delivery names: its type (`email.<moment>`), the event that made it, its delivery id (`mail_…`). */
export interface MailDelivery {
  type: string;
  eventId: string;
  webhookId: string;
}

/** Whether a mail may be sent again at a person's asking, and as what. */
export type MailResend = { ok: true; mail: PlannedMail } | { ok: false; code: 'agent_mail' | 'request_closed' | 'mail_unknown'; message: string };

/**
 * May a person have this mail sent again (`POST …/deliveries/:id/redeliver`), and which mail is
 * it? A notification is made again as it would be now: a request's mail only while the request
 * is still open (with new links: the old ones may have expired), the task's end mail at any time.
 * An agent's outbox mail is not: its outcome is on the task (EmailSent / EmailFailed) and the agent
 * went on from it; sending it later would make the log untrue. Pure: the gateway asks before
 * recording the request, the notifier again before sending (a request may close in between).
 */
export function mailToResend(delivery: MailDelivery, events: readonly { id: string; type: string; data: unknown; metadata?: unknown }[], state: TaskState): MailResend {
  if (delivery.type === 'email.outbox')
    return { ok: false, code: 'agent_mail', message: "an agent's mail (send_email) is not sent again: what became of it is recorded on the task (EmailSent / EmailFailed) and the agent went on from that; ask for a new mail instead" };
  const event = events.find((e) => e.id === delivery.eventId);
  const mail = event ? plannedMails(event, state).find((p) => mailIds(state.id, p.key, p.recipient, '').deliveryId === delivery.webhookId) : undefined;
  if (mail) return { ok: true, mail };
  if (delivery.type === 'email.awaiting_input' && event)
    return { ok: false, code: 'request_closed', message: `the request this mail asked about (${String((event.data as { requestId?: unknown }).requestId)}) is no longer open: there is nothing left to decide` };
  return { ok: false, code: 'mail_unknown', message: `the task makes no such mail any more (${delivery.type})` };
}
