import { BusEvent, deadLetterRecorder, retry, startConsumer, TopologyWatch, type BusNames, type HandlerContext, type Outcome, type RunningConsumer, type TopologyOptions } from '@baton/bus';
import { fold, NotifyConfig, taskStreamId, WebhookConfig } from '@baton/domain';
import { redactCredentials, toTaskView } from '@baton/api';
import type { EventStore } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import { recordDelivery, wasDelivered } from '@baton/storage';
import { jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import { assertPublicUrl } from './egress.ts';
import { deliverMails, type MailDeps } from './mail.ts';
import { deliver, sign, webhookTypesFor, type DeliveryResult } from './webhook.ts';

export interface NotifierDeps {
  store: EventStore;
  pool: pg.Pool;
  js: JetStreamClient;
  names: BusNames;
  log: Logger;
  secret: string;
  timeoutMs: number;
  maxAttempts: number;
  backoffMs: number[];
  concurrency: number;
  /** `working()` interval while a delivery runs; below the consumer's ack_wait. */
  heartbeatMs?: number;
  now: () => Date;
  /** Allow webhook URLs on loopback/private networks (development only). */
  allowPrivateNetworks: boolean;
  /** For the bus topology watch (re-creates a missing stream or consumer); absent: no watch. */
  nc?: NatsConnection;
  busCheckMs?: number;
  topology?: TopologyOptions;
  /** Mail (docs/email.md): the task's notify mails and the agents' outbox; absent: no mail handling at all. */
  mail?: Omit<MailDeps, 'store' | 'pool' | 'log' | 'now' | 'maxAttempts'>;
}

/** What a task asked to be told of: its webhook and its mail recipients (fixed at submission). */
interface Subscriptions {
  webhook: WebhookConfig | null;
  notify: NotifyConfig | null;
}
const subscribed = (s: Subscriptions | undefined): boolean => !!s && (s.webhook !== null || s.notify !== null);

/**
 * Delivers per-task webhooks and mail. One NATS message = one event = at most one webhook
 * delivery and the mails it makes, retried with backoff (the consumer's nak delay) until they
 * succeed or attempts run out; every attempt is a row in webhook_deliveries. Of task state the
 * notifier writes only what became of an outbox mail (EmailSent / EmailFailed).
 */
export async function startNotifier(d: NotifierDeps): Promise<RunningConsumer> {
  // What a task subscribed to never changes after submission: cache it (bounded) so most events cost no query.
  const cache = new Map<string, Subscriptions>();
  const subscriptionsOf = async (taskId: string): Promise<Subscriptions> => {
    const known = cache.get(taskId);
    if (known) return known;
    const first = (await d.store.readStream(taskStreamId(taskId), 0, 1))[0];
    const subs = first?.type === 'TaskSubmitted' ? { webhook: first.data.webhook, notify: first.data.notify ?? null } : { webhook: null, notify: null };
    remember(taskId, subs);
    return subs;
  };
  function remember(taskId: string, subs: Subscriptions): void {
    if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    cache.set(taskId, subs);
  }
  const mail: MailDeps | null = d.mail ? { ...d.mail, store: d.store, pool: d.pool, log: d.log.child({ component: 'mail' }), now: d.now, maxAttempts: d.maxAttempts } : null;
  const typeToken = d.names.taskIdToken + 1;

  const nc = d.nc;
  const topology = nc
    ? new TopologyWatch({ jsm: () => jetstreamManager(nc), names: d.names, ...(d.topology ? { topology: d.topology } : {}), log: d.log.child({ component: 'topology' }), everyMs: d.busCheckMs ?? 5000 })
    : null;
  topology?.start();
  const consumer = await startConsumer({
    onMissing: () => topology?.poke(),
    js: d.js,
    stream: d.names.eventsStream,
    consumer: d.names.consumers.notifier,
    schema: BusEvent,
    log: d.log.child({ component: 'webhooks' }),
    concurrency: d.concurrency,
    maxAttempts: d.maxAttempts,
    backoffMs: d.backoffMs,
    ...(d.heartbeatMs ? { heartbeatMs: d.heartbeatMs } : {}),
    onDeadLetter: deadLetterRecorder(d.pool),
    // Tasks known to have neither webhook nor mail recipients: ack without even parsing the message
    // (an agent's outbox mail, EmailRequested, is for any task).
    prefilter: (subject) => {
      const tokens = subject.split('.');
      const taskId = tokens[d.names.taskIdToken];
      if (mail && tokens[typeToken] === 'EmailRequested') return true;
      return !(taskId && cache.has(taskId) && !subscribed(cache.get(taskId)));
    },
    handle: async (event, ctx) => {
      if (event.type === 'TaskSubmitted' && !cache.has(event.taskId)) {
        // The subscriptions travel in TaskSubmitted itself: no query needed.
        const data = (event.data ?? {}) as { webhook?: unknown; notify?: unknown };
        const hook = WebhookConfig.nullable().safeParse(data.webhook ?? null);
        const notify = NotifyConfig.nullable().safeParse(data.notify ?? null);
        if (hook.success && notify.success) remember(event.taskId, { webhook: hook.data, notify: notify.data });
      }
      const subs = await subscriptionsOf(event.taskId);
      const hookOutcome = subs.webhook ? await deliverWebhook(event, ctx, subs.webhook) : undefined;
      const mailRetry = mail && (subs.notify || event.type === 'EmailRequested') ? await deliverMails(mail, event, ctx.deliveryCount) : null;
      if (hookOutcome) return hookOutcome;
      if (mailRetry) return retry(mailRetry.reason, mailRetry.delayMs);
    },
  });

  /** The event's webhook, if the task subscribed to its type: signed, delivered, the attempt recorded. */
  async function deliverWebhook(event: BusEvent, ctx: HandlerContext, hook: WebhookConfig): Promise<Outcome | undefined> {
    const type = webhookTypesFor(event.type).find((t) => hook.events.includes(t));
    if (!type) return undefined;
    const webhookId = `msg_${event.id}`;
    // Delivered already: the bus was re-fed from the log, or the event came again for its mail.
    if (await wasDelivered(d.pool, event.taskId, webhookId)) return undefined;
    const events = await d.store.readTask(event.taskId);
    const upTo = events.filter((e) => e.position <= BigInt(event.position));
    const task = toTaskView(fold(upTo));
    const timestamp = Math.floor(d.now().getTime() / 1000);
    const body = JSON.stringify({ type, timestamp: new Date(timestamp * 1000).toISOString(), data: { task } });
    const headers = { 'webhook-id': webhookId, 'webhook-timestamp': String(timestamp), 'webhook-signature': sign(d.secret, webhookId, timestamp, body) };
    let r: DeliveryResult;
    try {
      if (!d.allowPrivateNetworks) await assertPublicUrl(hook.url);
      r = await deliver(hook.url, headers, body, d.timeoutMs);
    } catch (err) {
      // Refused (non-public address) or unresolvable: recorded like any failed attempt.
      r = { ok: false, status: null, error: (err as Error).message, durationMs: 0, gone: false, retryAfterMs: null };
    }
    // Credentials in a URL (registered before the gateway refused them) are never stored or logged.
    const url = redactCredentials(hook.url);
    const error = r.error === null ? null : redactCredentials(r.error);
    await recordDelivery(d.pool, { taskId: event.taskId, eventId: event.id, webhookId, type, url, attempt: ctx.deliveryCount, statusCode: r.status, ok: r.ok, error, durationMs: r.durationMs });
    if (r.ok || r.gone) return undefined;
    d.log.warn({ taskId: event.taskId, url, attempt: ctx.deliveryCount, error }, 'webhook delivery failed');
    return retry(r.error ?? 'failed', r.retryAfterMs ?? undefined);
  }
  return {
    get inFlight() {
      return consumer.inFlight;
    },
    async stop() {
      await topology?.stop();
      await consumer.stop();
    },
  };
}
