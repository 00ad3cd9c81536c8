import type { BusEvent } from '@baton/bus';
import { inSpan, metrics, SpanKind } from '@baton/telemetry';
import { fold, recipientsRefusal, type MailRecipientRules, type RecordedEvent, type RecordedEventOf, type TaskState } from '@baton/domain';
import { handleCommand, type EventStore } from '@baton/event-store';
import { closedRequestMailKey, earlierRejections, endMail, mailIds, MAIL_EVENT_TYPES, mailToResend, outboxMail, plannedMails, requestMail, signLinkToken, type LinkAction, type ListedArtifact, type PlannedMail } from '@baton/mail';
import { inTransaction } from '@baton/db';
import type { Logger } from '@baton/runtime';
import { claimMail, giveUpMail, MailClaimLostError, mailInFlight, mailSendState, markHandingOver, readArtifact, recordDelivery, recordMailResend, recordNextAttempt, settleAbandonedMail, settleMail, type ClaimedRedelivery } from '@baton/storage';
import type pg from 'pg';
import { SendError, type Mailer, type OutgoingMail } from './mailer.ts';

export interface MailDeps {
  store: EventStore;
  pool: pg.Pool;
  log: Logger;
  now: () => Date;
  /** null: mail is off (no SMTP_URL). */
  mailer: Mailer | null;
  from: string;
  /** Where the mailed links point (the gateway, as people reach it). */
  publicUrl: string;
  linkSecret: string;
  linkTtlMs: number;
  /** Files attached to one mail at most, in all; larger ones are linked. */
  attachMaxBytes: number;
  /** How long a claim is held while sending (longer than the SMTP timeouts). */
  leaseMs: number;
  /** Who holds the claims this process takes (unique per process). */
  holder: string;
  /** Where each tenant's mail may go (MAIL_ALLOWED_RECIPIENTS); absent: anywhere. */
  recipients?: MailRecipientRules | undefined;
  /** Claims of one mail allowed (its ledger's attempts): a failure at the last is final. Absent: the bus's last delivery decides. */
  maxAttempts?: number;
}

/** A mail that must be tried again later (the consumer naks the event with backoff). */
export interface MailRetry {
  reason: string;
  delayMs?: number;
}

/** A mail that cannot be made (an attachment gone): given up at once. */
class ComposeError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

const consoleUrl = (d: MailDeps, taskId: string): string => `${d.publicUrl}/#/tasks/${taskId}`;
/** The longest artifact path a file link names (a token's `r` claim). */
const MAX_LINKED_PATH = 1024;

/** How long a mailed file link works: a report is read later than a request is decided. */
export const FILE_LINK_TTL_MS = 30 * 86_400_000;

/**
 * A mailed link to one version of an artifact that needs no API key (the API's artifact URL
 * answered a mail's reader 401): signed for its recipient, for FILE_LINK_TTL_MS (or the request
 * links' time, if longer).
 */
const fileUrl = (d: MailDeps, task: Pick<TaskState, 'id' | 'tenantId' | 'artifacts'>, path: string, recipient: string): string => {
  // A path too long for a link's claim (over 1,024 characters): the console, rather than no mail at all.
  if (path.length > MAX_LINKED_PATH) return consoleUrl(d, task.id);
  const sha = task.artifacts.find((a) => a.path === path)?.sha256;
  const expires = Math.floor((d.now().getTime() + Math.max(d.linkTtlMs, FILE_LINK_TTL_MS)) / 1000);
  const token = signLinkToken(d.linkSecret, { t: task.tenantId, k: task.id, r: path, d: 'file', a: recipient.slice(0, 254), e: expires, ...(sha ? { h: sha } : {}) });
  return `${d.publicUrl}/mail/file?token=${token}`;
};

/**
 * Send the mails an event makes (docs/email.md), each at most once: the ledger row of its
 * (task, moment, recipient) is claimed first, every attempt is recorded beside the webhooks'
 * (`GET /v1/tasks/:id/deliveries`), and an outbox mail's outcome is recorded on the task
 * (EmailSent / EmailFailed). Returns a retry when some mail failed in a way another attempt may
 * mend (4xx, no connection) or another notifier is sending it.
 */
/** A task's events as read from the log, and among them the event a bus message names. */
export interface LoggedEvent {
  events: RecordedEvent[];
  recorded: RecordedEvent;
}

/**
 * The event a bus message names as the log holds it (a message may come without its data, too
 * big to carry), with its task's events: read once, on first use, for the webhooks and the mails
 * of one message alike; null when the log has no such event.
 */
export function loggedEvent(store: Pick<EventStore, 'readTask'>, event: Pick<BusEvent, 'taskId' | 'position'>): () => Promise<LoggedEvent | null> {
  let read: Promise<LoggedEvent | null> | undefined;
  return () =>
    (read ??= store.readTask(event.taskId).then((events) => {
      const recorded = events.find((e) => e.position === BigInt(event.position));
      return recorded ? { events, recorded } : null;
    }));
}

/** The domain of this deployment's Message-IDs: its public URL's host. */
const mailDomain = (publicUrl: string): string => new URL(publicUrl).hostname || 'baton';

export async function deliverMails(d: MailDeps, event: BusEvent, lastAttempt: boolean, logged: () => Promise<LoggedEvent | null>, givenUp?: string): Promise<MailRetry | null> {
  if (!MAIL_EVENT_TYPES.has(event.type)) return null;
  const read = await logged();
  if (!read) return null;
  const { events, recorded } = read;
  const state = fold(events);
  const planned = plannedMails(recorded, state);
  const closed = closedRequestMailKey(recorded, state);
  let retry: MailRetry | null = closed ? await settleAbandoned(d, event, closed) : null;
  for (const p of planned) {
    if (givenUp !== undefined) {
      await giveUpOne(d, event, state, p, givenUp);
      continue;
    }
    const r = await deliverOne(d, event, state, events, p, lastAttempt);
    if (r && (!retry || (r.delayMs ?? Infinity) < (retry.delayMs ?? Infinity))) retry = r;
  }
  return retry;
}

/**
 * A request's mail claimed by a notifier that stopped mid-send, the request closed since (it timed
 * out while the deployment was down, say): not sent again, but settled and said where a person
 * looks — an attempt in /deliveries, as for a mail still planned — instead of left `sending`
 * with no record while its links may be in someone's inbox. A claim still within its lease is
 * looked at again when the lease ends (the event's message comes back then).
 */
async function settleAbandoned(d: MailDeps, event: BusEvent, key: string): Promise<MailRetry | null> {
  const error = {
    unknown: 'outcome unknown: the notifier sending it stopped before recording what the SMTP server said, and the request has closed since; not sent again (it may have gone out)',
    failed: 'not sent: the notifier sending it stopped before handing it over, and the request has closed since',
    retry: 'not sent: the request closed before it was tried again',
  };
  // Settled and said together (one transaction): settled alone, a notifier dying next had left no attempt to say so.
  const { settled, runningForMs } = await inTransaction(d.pool, async (c) => {
    const r = await settleAbandonedMail(c, { taskId: event.taskId, key, error });
    for (const s of r.settled) {
      const { deliveryId } = mailIds(event.taskId, key, s.recipient, mailDomain(d.publicUrl));
      // A mail that was waiting to be tried again says so as its next attempt; a claim cut short, as the attempt it was.
      await recordDelivery(c, { channel: 'email', taskId: event.taskId, eventId: event.id, webhookId: deliveryId, type: 'email.awaiting_input', url: `mailto:${s.recipient}`, attempt: s.why === 'retry' ? s.attempts + 1 : s.attempts, statusCode: null, ok: false, error: error[s.why], durationMs: 0, givenUp: true });
    }
    return r;
  });
  for (const s of settled) {
    metrics.deliveries.inc({ channel: 'email', outcome: 'failed' });
    d.log.warn({ taskId: event.taskId, key, recipient: s.recipient, state: s.state }, error[s.why]);
  }
  // A claim still running: its holder may finish (and record its outcome), or have died — the message comes back when the lease ends, to settle it then.
  return runningForMs === null ? null : { reason: 'a notifier still holds the closed request\'s mail', delayMs: Math.max(100, runningForMs) };
}

/**
 * A mail whose event came back past its attempts unsettled (notifiers kept stopping mid-way):
 * not sent again, but settled — `unknown` if it was being handed over, else `failed` — with an
 * attempt in /deliveries and, for an agent's mail, EmailFailed on the task; left alone while a
 * live claim holds it (its holder records the outcome) and once it is settled.
 */
async function giveUpOne(d: MailDeps, event: BusEvent, state: TaskState, p: PlannedMail, why: string): Promise<void> {
  const { deliveryId, messageId } = mailIds(event.taskId, p.key, p.recipient, mailDomain(d.publicUrl));
  const error = { failed: `not sent: given up: ${why}`, unknown: `outcome unknown: given up while it was being handed over: ${why}; not sent again (it may have gone out)` };
  const settled = await inTransaction(d.pool, async (c) => {
    const r = await giveUpMail(c, { taskId: event.taskId, key: p.key, recipient: p.recipient, messageId, error });
    if (r) await recordDelivery(c, { channel: 'email', taskId: event.taskId, eventId: event.id, webhookId: deliveryId, type: `email.${p.moment}`, url: `mailto:${p.recipient}`, attempt: r.attempts + 1, statusCode: null, ok: false, error: error[r.state], durationMs: 0, givenUp: true });
    return r;
  });
  if (!settled) {
    // Settled before (by this or a notifier that died before telling the task): an agent's mail the task still shows queued is told now.
    if (p.kind !== 'outbox' || state.emails[p.emailId]?.status !== 'queued') return;
    const ledger = await mailSendState(d.pool, { taskId: event.taskId, key: p.key, recipient: p.recipient });
    if (ledger && (ledger.state === 'sent' || ledger.state === 'failed' || ledger.state === 'unknown')) await tellTaskFromLedger(d, event.taskId, state, p, { state: ledger.state, lastError: ledger.lastError }, messageId);
    return;
  }
  metrics.deliveries.inc({ channel: 'email', outcome: 'failed' });
  d.log.warn({ taskId: event.taskId, key: p.key, recipient: p.recipient, state: settled.state }, error[settled.state]);
  if (p.kind === 'outbox') await settleOutbox(d, event.taskId, p.emailId, { code: settled.state === 'unknown' ? 'outcome_unknown' : 'given_up', message: error[settled.state] });
}

/** An attempt recorded and the ledger settled in one transaction: a notifier that died between the two had left them disagreeing (a mail shown given up tried again; one delivered marked unknown). */
async function settleWithAttempt(d: MailDeps, attempt: Parameters<typeof recordDelivery>[1], settle: Parameters<typeof settleMail>[1]): Promise<void> {
  await inTransaction(d.pool, async (c) => {
    await recordDelivery(c, attempt);
    await settleMail(c, settle);
  });
}

/**
 * An agent's mail the ledger has settled while the task still shows it queued (its notifier died
 * between the two): the task is told now, from the ledger — sent (its recipients as asked: the
 * refusals, if any, are in its attempt in /deliveries), not sent, or of unknown outcome.
 */
async function tellTaskFromLedger(d: MailDeps, taskId: string, state: TaskState, p: Extract<PlannedMail, { kind: 'outbox' }>, ledger: { state: 'sent' | 'failed' | 'unknown'; lastError: string | null }, messageId: string): Promise<void> {
  if (state.emails[p.emailId]?.status !== 'queued') return;
  if (ledger.state === 'sent') await recordOutcome(d, taskId, { type: 'RecordEmailSent', emailId: p.emailId, messageId, accepted: p.to, rejected: [] });
  else await settleOutbox(d, taskId, p.emailId, { code: ledger.state === 'unknown' ? 'outcome_unknown' : 'not_sent', message: ledger.lastError ?? (ledger.state === 'unknown' ? 'outcome unknown' : 'not sent') });
}

async function deliverOne(d: MailDeps, event: BusEvent, state: TaskState, events: RecordedEvent[], p: PlannedMail, last: boolean): Promise<MailRetry | null> {
  const taskId = event.taskId;
  if (!d.mailer) {
    if (p.kind === 'outbox') await settleOutbox(d, taskId, p.emailId, { code: 'mail_off', message: 'mail is off: the notifier has no SMTP_URL' });
    return null;
  }
  const { deliveryId, messageId } = mailIds(taskId, p.key, p.recipient, mailDomain(d.publicUrl));
  const attempt = { channel: 'email' as const, taskId, eventId: event.id, webhookId: deliveryId, type: `email.${p.moment}`, url: `mailto:${p.recipient}` };
  const claim = await claimMail(d.pool, { taskId, key: p.key, recipient: p.recipient, messageId, holder: d.holder, leaseMs: d.leaseMs });
  if (!claim.claimed) {
    if (claim.state === 'busy') {
      d.log.info({ taskId, key: p.key, recipient: p.recipient, retryInMs: claim.retryInMs }, 'another notifier is sending it; looking again when its claim ends');
      return { reason: 'another notifier is sending it', delayMs: claim.retryInMs };
    }
    if (claim.state === 'unknown' && claim.marked) {
      const message = 'outcome unknown: the notifier sending it stopped before recording what the SMTP server said; not sent again (it may have gone out)';
      await recordDelivery(d.pool, { ...attempt, attempt: claim.attempt, statusCode: null, ok: false, error: message, durationMs: 0, givenUp: true });
      if (p.kind === 'outbox') await settleOutbox(d, taskId, p.emailId, { code: 'outcome_unknown', message });
      d.log.warn({ taskId, key: p.key, recipient: p.recipient }, message);
    } else if (p.kind === 'outbox' && !claim.marked) await tellTaskFromLedger(d, taskId, state, p, claim, messageId);
    return null; // sent, given up, or unknown: nothing more
  }
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);
  let mail: OutgoingMail;
  try {
    mail = await compose(d, state, events, p, messageId);
  } catch (err) {
    const e = err instanceof ComposeError ? err : new ComposeError('compose_failed', (err as Error).message);
    await settleWithAttempt(d, { ...attempt, attempt: claim.attempt, statusCode: null, ok: false, error: e.message, durationMs: elapsed(), givenUp: true }, { taskId, key: p.key, recipient: p.recipient, holder: d.holder, state: 'failed', error: e.message });
    if (p.kind === 'outbox') await settleOutbox(d, taskId, p.emailId, { code: e.code, message: e.message });
    return null;
  }
  try {
    const mailer = d.mailer;
    const r = await inSpan('smtp send', { kind: SpanKind.CLIENT, attributes: { 'baton.task_id': taskId, 'baton.mail.moment': p.moment, 'baton.mail.attempt': claim.attempt } }, () => mailer.send(mail, { beforeData: () => markHandingOver(d.pool, { taskId, key: p.key, recipient: p.recipient, holder: d.holder }) }));
    metrics.deliveries.inc({ channel: 'email', outcome: 'delivered' });
    metrics.deliverySeconds.observe({ channel: 'email' }, elapsed() / 1000);
    const partly = r.refusals.length > 0 ? `; refused: ${r.refusals.join(', ')}` : '';
    await settleWithAttempt(d, { ...attempt, attempt: claim.attempt, statusCode: r.code, ok: true, error: partly ? partly.slice(2) : null, durationMs: elapsed() }, { taskId, key: p.key, recipient: p.recipient, holder: d.holder, state: 'sent', error: null });
    if (p.kind === 'outbox') await recordOutcome(d, taskId, { type: 'RecordEmailSent', emailId: p.emailId, messageId, accepted: r.accepted, rejected: r.rejected });
    return null;
  } catch (err) {
    if (err instanceof MailClaimLostError) {
      // Its lease ended before the message went (a stall, a pause): another holder sends it.
      d.log.warn({ taskId, key: p.key, recipient: p.recipient, attempt: claim.attempt }, err.message);
      return null;
    }
    const e = err instanceof SendError ? err : new SendError((err as Error).message, null, false, { cause: err });
    if (e.outcomeUnknown) {
      // The server holds the whole message and did not say: at most once, as for a notifier that
      // died there (a slow server answered each attempt late, and got every one of them).
      const message = `outcome unknown: ${e.message}; not sent again (it may have gone out)`;
      metrics.deliveries.inc({ channel: 'email', outcome: 'failed' });
      metrics.deliverySeconds.observe({ channel: 'email' }, elapsed() / 1000);
      await settleWithAttempt(d, { ...attempt, attempt: claim.attempt, statusCode: null, ok: false, error: message, durationMs: elapsed(), givenUp: true }, { taskId, key: p.key, recipient: p.recipient, holder: d.holder, state: 'unknown', error: message });
      d.log.warn({ taskId, key: p.key, recipient: p.recipient, attempt: claim.attempt }, message);
      if (p.kind === 'outbox') await settleOutbox(d, taskId, p.emailId, { code: 'outcome_unknown', message });
      return null;
    }
    const giveUp = e.permanent || last || claim.attempt >= (d.maxAttempts ?? Infinity);
    metrics.deliveries.inc({ channel: 'email', outcome: giveUp ? 'failed' : 'retried' });
    metrics.deliverySeconds.observe({ channel: 'email' }, elapsed() / 1000);
    await settleWithAttempt(d, { ...attempt, attempt: claim.attempt, statusCode: e.code, ok: false, error: e.message, durationMs: elapsed(), givenUp: giveUp }, { taskId, key: p.key, recipient: p.recipient, holder: d.holder, state: giveUp ? 'failed' : 'retry', error: e.message });
    d.log.warn({ taskId, key: p.key, recipient: p.recipient, attempt: claim.attempt, code: e.code, error: e.message, giveUp }, 'mail not sent');
    if (giveUp && p.kind === 'outbox') await settleOutbox(d, taskId, p.emailId, { code: e.permanent ? 'smtp_rejected' : 'smtp_unavailable', message: e.message });
    return giveUp ? null : { reason: `mail not sent: ${e.message}` };
  }
}

/**
 * A person asked for a notification mail again (a redelivery request of a mail's delivery,
 * docs/email.md): made as it would be now (`mailToResend`: a request's mail only while it is
 * open, with new links), sent once and recorded as the mail's next attempt, the ledger updated.
 * Not sent, and recorded as an attempt naming why: mail off, an agent's mail, a request decided
 * meanwhile, a mail the notifiers are still trying. A failure is not retried (one attempt per
 * request, as for webhooks).
 */
export async function resendMail(d: Pick<MailDeps, 'store' | 'pool' | 'log'>, mail: MailDeps | null, c: ClaimedRedelivery): Promise<void> {
  const events = await d.store.readTask(c.taskId);
  const state = fold(events);
  const attempt = { channel: 'email' as const, taskId: c.taskId, eventId: c.eventId, webhookId: c.webhookId, type: c.type, url: c.url, redeliveryId: c.id };
  const started = performance.now();
  const notSent = async (why: string): Promise<void> => {
    d.log.warn({ taskId: c.taskId, redeliveryId: c.id, why }, 'mail not sent again');
    await recordNextAttempt(d.pool, { ...attempt, statusCode: null, ok: false, error: `not sent: ${why}`, durationMs: 0 });
  };
  const resend = mailToResend(c, events, state);
  if (!resend.ok) return notSent(resend.message);
  const p = resend.mail;
  if (!mail?.mailer) return notSent('mail is off: the notifier has no SMTP_URL');
  const mailer = mail.mailer;
  const key = { taskId: c.taskId, key: p.key, recipient: p.recipient };
  const ledger = await mailSendState(d.pool, key);
  if (mailInFlight(ledger)) return notSent(`the notifiers are still trying to send it (attempt ${ledger?.attempts ?? 0})`);
  const { messageId } = mailIds(c.taskId, p.key, p.recipient, mailDomain(mail.publicUrl), c.id);
  const elapsed = (): number => Math.round(performance.now() - started);
  const outcome = await (async (): Promise<{ ok: boolean; statusCode: number | null; error: string | null }> => {
    try {
      const outgoing = await compose(mail, state, events, p, messageId);
      const r = await inSpan('smtp send', { kind: SpanKind.CLIENT, attributes: { 'baton.task_id': c.taskId, 'baton.mail.moment': p.moment, 'baton.mail.redelivery': c.id } }, () => mailer.send(outgoing));
      return { ok: true, statusCode: r.code, error: r.refusals.length > 0 ? `refused: ${r.refusals.join(', ')}` : null };
    } catch (err) {
      return { ok: false, statusCode: err instanceof SendError ? err.code : null, error: (err as Error).message };
    }
  })();
  const { ok, statusCode, error } = outcome;
  metrics.deliveries.inc({ channel: 'email', outcome: ok ? 'delivered' : 'failed' });
  metrics.deliverySeconds.observe({ channel: 'email' }, elapsed() / 1000);
  // The ledger first: once the attempt is listed, the ledger says what became of it.
  await recordMailResend(d.pool, { ...key, messageId, ok, error });
  await recordNextAttempt(d.pool, { ...attempt, statusCode, ok, error, durationMs: elapsed() });
}

/** The mail itself: its contents (@baton/mail), links, and files. */
async function compose(d: MailDeps, state: TaskState, events: RecordedEvent[], p: PlannedMail, messageId: string): Promise<OutgoingMail> {
  // Only where the deployment lets the tenant's mail go: the gateway and the runner refuse others first; this is the last word (a task from before the rule, a rule changed since).
  const refusal = recipientsRefusal(d.recipients, state.tenantId, p.kind === 'outbox' ? p.to : [p.recipient]);
  if (refusal) throw new ComposeError('recipient_not_allowed', `not sent: ${refusal}`);
  const base = { from: d.from, messageId, headers: { 'X-Baton-Task': state.id } as Record<string, string> };
  if (p.kind === 'outbox') {
    const requested = events.find((e): e is RecordedEventOf<'EmailRequested'> => e.type === 'EmailRequested' && e.data.emailId === p.emailId);
    if (!requested) throw new ComposeError('compose_failed', `email ${p.emailId} is not in the task's log`);
    const files = await collectFiles(d, state, requested.data.attachments.map((a) => a.path), true, p.to.join(', '));
    const content = outboxMail(state, { subject: requested.data.subject, body: requested.data.body + linkedSection(files.linked), agentId: requested.data.agentId });
    return { ...base, headers: { ...base.headers, 'X-Baton-Email': p.emailId }, to: p.to, ...content, attachments: files.attached };
  }
  const headers = { ...base.headers, 'Auto-Submitted': 'auto-generated' };
  if (p.kind === 'request') {
    const expiresAt = new Date(d.now().getTime() + d.linkTtlMs);
    const link = (action: LinkAction): string => {
      const token = signLinkToken(d.linkSecret, { t: state.tenantId, k: state.id, r: p.request.requestId, d: action, a: p.recipient, e: Math.floor(expiresAt.getTime() / 1000) });
      return `${d.publicUrl}/mail/${action === 'answer' ? 'answer' : 'decide'}?token=${token}`;
    };
    const links =
      p.request.kind === 'approval'
        ? { approve: link('approve'), reject: link('reject') }
        : p.request.kind === 'clarification'
          ? { answer: link('answer') }
          : {};
    const content = requestMail(state, p.request, { ...links, console: consoleUrl(d, state.id), expiresAt: expiresAt.toISOString() }, earlierRejections(events, p.request));
    return { ...base, headers, to: [p.recipient], ...content, attachments: [] };
  }
  // The end of the run: the report, every file listed and linked, the small ones attached.
  const reportPath = state.status === 'completed' ? state.result?.reportPath ?? null : null;
  const report = reportPath ? ((await readArtifact(d.pool, state.id, reportPath))?.content.toString('utf8') ?? null) : null;
  const paths = state.artifacts.map((a) => a.path).sort((a, b) => Number(b === reportPath) - Number(a === reportPath));
  const files = await collectFiles(d, state, paths, false, p.recipient);
  const attachedNames = new Set(files.attached.map((a) => a.filename));
  const artifacts: ListedArtifact[] = state.artifacts.map((a) => ({ path: a.path, bytes: a.bytes, url: fileUrl(d, state, a.path, p.recipient), attached: attachedNames.has(a.path) }));
  const content = endMail(state, { report, artifacts, console: consoleUrl(d, state.id) });
  return { ...base, headers, to: [p.recipient], ...content, attachments: files.attached };
}

/** Read the files to attach, up to the size limit in all (the rest linked). `required`: a file that is gone is an error. */
async function collectFiles(d: MailDeps, task: Pick<TaskState, 'id' | 'tenantId' | 'artifacts'>, paths: string[], required: boolean, recipient: string) {
  const taskId = task.id;
  const attached: OutgoingMail['attachments'] = [];
  const linked: { path: string; url: string }[] = [];
  let total = 0;
  for (const path of paths) {
    const stored = await readArtifact(d.pool, taskId, path);
    if (!stored) {
      if (required) throw new ComposeError('attachment_missing', `attachment '${path}' is no longer stored`);
      continue;
    }
    if (total + stored.content.length > d.attachMaxBytes) {
      linked.push({ path, url: fileUrl(d, task, path, recipient) });
      continue;
    }
    total += stored.content.length;
    attached.push({ filename: path, content: stored.content, contentType: stored.mediaType });
  }
  return { attached, linked };
}

const linkedSection = (linked: { path: string; url: string }[]): string =>
  linked.length === 0 ? '' : `\n\n---\n\nToo large to attach:\n\n${linked.map((l) => `- [${l.path}](${l.url})`).join('\n')}\n`;

function settleOutbox(d: MailDeps, taskId: string, emailId: string, failure: { code: string; message: string }): Promise<void> {
  return recordOutcome(d, taskId, { type: 'RecordEmailFailed', emailId, ...failure });
}

/** EmailSent / EmailFailed on the task (a no-op if it has an outcome already). */
async function recordOutcome(d: MailDeps, taskId: string, command: { type: 'RecordEmailSent'; emailId: string; messageId: string; accepted: string[]; rejected: string[] } | { type: 'RecordEmailFailed'; emailId: string; code: string; message: string }): Promise<void> {
  await handleCommand(d.store, taskId, command, { metadata: { actor: 'baton:notifier' }, now: d.now });
}
