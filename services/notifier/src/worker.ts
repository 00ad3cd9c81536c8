import { redactCredentials } from '@baton/api';
import { BusEvent, deadLetterRecorder, hasOwnTargets, retry, startConsumer, TopologyWatch, type BusNames, type HandlerContext, type Outcome, type RunningConsumer, type TopologyOptions } from '@baton/bus';
import { fold, notifiesAnyone, NotifyConfig, taskStreamId, WebhookConfig } from '@baton/domain';
import type { EventStore } from '@baton/event-store';
import { setBounded, type Logger } from '@baton/runtime';
import { metrics } from '@baton/telemetry';
import { findTaskWebhookSecret, listEndpoints, owedToEndpoints, recordNextAttempt, targetSettled, taskWebhookSecrets, validSecrets, type TaskWebhookSecret, type WebhookEndpoint } from '@baton/storage';
import { jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import { deliverMails, loggedEvent, type LoggedEvent, type MailDeps } from './mail.ts';
import { webhookAgent } from './egress.ts';
import { startRedeliveries } from './redeliver.ts';
import { nextRetryDelay } from './schedule.ts';
import { sendMessage as send, webhookIdOf, type Message } from './send.ts';
import { endpointServes, needsState, webhookMessagesFor } from './webhook.ts';

export interface NotifierDeps {
  store: EventStore;
  pool: pg.Pool;
  js: JetStreamClient;
  names: BusNames;
  log: Logger;
  /** The deployment's `WEBHOOK_SECRET`: signs a task's own webhook while its tenant has no key of its own (taskWebhookSecrets). */
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
  /** How long a tenant's endpoint list and its key for its tasks' own webhooks are cached (default 5000 ms; 0: read for every event). */
  endpointsCacheMs?: number;
  /** How often redelivery requests are looked for (default 1000 ms). */
  redeliverEveryMs?: number;
  /** Mail (docs/email.md): the task's notify mails and the agents' outbox; absent: no mail handling at all. */
  mail?: Omit<MailDeps, 'store' | 'pool' | 'log' | 'now'>;
}

/** What a task asked to be told of: its webhook and its mail recipients (fixed at submission). */
interface Subscriptions {
  tenantId: string | null;
  webhook: WebhookConfig | null;
  notify: NotifyConfig | null;
}

/** Where one event's webhook messages may go: the task's own webhook or one of its tenant's endpoints. */
interface Target {
  url: string;
  events: readonly string[];
  secrets: string[];
  endpointId: string | null;
}

/**
 * Delivers per-task webhooks and mail. One NATS message = one event = at most one webhook
 * delivery and the mails it makes, retried with backoff (the consumer's nak delay) until they
 * succeed or attempts run out; every attempt is a row in webhook_deliveries. Of task state the
 * notifier writes only what became of an outbox mail (EmailSent / EmailFailed).
 */
export async function startNotifier(d: NotifierDeps): Promise<RunningConsumer> {
  // Every outcome's series from the start, at 0: an alert on increase(…{outcome="failed"}) sees the first delivery given up (a series born at 1 shows no increase).
  for (const channel of ['webhook', 'email']) for (const outcome of ['delivered', 'retried', 'failed', ...(channel === 'webhook' ? ['gone'] : [])]) metrics.deliveries.inc({ channel, outcome }, 0);
  // What a task subscribed to never changes after submission: cache it (bounded) so most events cost no query.
  const cache = new Map<string, Subscriptions>();
  const subscriptionsOf = async (taskId: string): Promise<Subscriptions> => {
    const known = cache.get(taskId);
    if (known) return known;
    const first = (await d.store.readStream(taskStreamId(taskId), 0, 1))[0];
    const subs = first?.type === 'TaskSubmitted' ? { tenantId: first.data.tenantId, webhook: first.data.webhook, notify: first.data.notify ?? null } : { tenantId: null, webhook: null, notify: null };
    remember(taskId, subs);
    return subs;
  };
  function remember(taskId: string, subs: Subscriptions): void {
    setBounded(cache, taskId, subs, 10_000);
  }
  // A tenant's endpoints (POST /v1/webhooks), cached for endpointsCacheMs: a change applies within
  // it. But a task with no targets of its own comes here only when the relay has seen an endpoint
  // of its tenant (or did not know the task): a cached empty list is then read again, so the
  // tenant's first endpoint applies at once here too.
  const endpointsCacheMs = d.endpointsCacheMs ?? 5000;
  const endpointCache = new Map<string, { at: number; list: WebhookEndpoint[] }>();
  const fresh = (c: { at: number } | undefined): boolean => !!c && Date.now() - c.at < endpointsCacheMs;
  const endpointsOf = async (tenantId: string, o: { trustEmpty: boolean }): Promise<WebhookEndpoint[]> => {
    const known = endpointCache.get(tenantId);
    if (known && fresh(known) && (known.list.length > 0 || o.trustEmpty)) return known.list;
    const list = await listEndpoints(d.pool, tenantId);
    setBounded(endpointCache, tenantId, { at: Date.now(), list }, 10_000);
    return list;
  };
  // The key a tenant's tasks' own webhooks are signed with (POST /v1/task-webhook-secret), cached as
  // long: a new or rotated key applies within it (the secret it replaces signs beside it longer).
  const keyCache = new Map<string, { at: number; key: TaskWebhookSecret | null }>();
  const ownWebhookSecrets = async (tenantId: string | null): Promise<string[]> => {
    if (!tenantId) return [d.secret];
    let known = keyCache.get(tenantId);
    if (!fresh(known)) setBounded(keyCache, tenantId, (known = { at: Date.now(), key: await findTaskWebhookSecret(d.pool, tenantId) }), 10_000);
    return taskWebhookSecrets(known!.key, d.secret, d.now());
  };
  const mail: MailDeps | null = d.mail ? { ...d.mail, store: d.store, pool: d.pool, log: d.log.child({ component: 'mail' }), now: d.now, maxAttempts: d.maxAttempts } : null;
  // One pool of connections for every webhook: the SSRF guard is in its connections (egress.ts).
  const agent = webhookAgent({ allowPrivateNetworks: d.allowPrivateNetworks });
  const sendMessage = (m: Message) => send({ ...d, agent }, m);

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
    // Deliveries of a message the bus allows: the attempts the notifier allows (counted in its ledger), and as many
    // again for deliveries cut short by a notifier that died (the bus cannot tell them from failures).
    maxAttempts: 2 * d.maxAttempts,
    backoffMs: d.backoffMs,
    ...(d.heartbeatMs ? { heartbeatMs: d.heartbeatMs } : {}),
    onDeadLetter: deadLetterRecorder(d.pool),
    // Back past its attempts unsettled (notifiers kept stopping mid-way): what it owed is given up and said, not left "to be tried again" for ever.
    onUnsettled: async (event, why) => {
      if (!notifiesAnyone(event)) return;
      const subs = await subscriptionsOf(event.taskId);
      const targets = await targetsOf(event, subs);
      // What an endpoint deleted, or changed to no longer take the type, was still owed: given up for that reason.
      await giveUpDroppedTargets(event, targets);
      const logged = loggedEvent(d.store, event);
      if (targets.length > 0) await deliverWebhooks(event, { givenUp: why }, targets, logged);
      if (mail && (subs.notify || event.type === 'EmailRequested')) await deliverMails(mail, event, true, logged, why);
    },
    // No prefilter: the relay sends this stream only what the notifier serves (`mayNotify`: the task
    // has a webhook or mail recipients, its tenant has endpoints, or it is an outbox mail), and
    // the transitions of tasks it did not know (submitted before it led), which cost a lookup here.
    handle: async (event, ctx) => {
      if (event.type === 'TaskSubmitted' && !cache.has(event.taskId)) {
        // The subscriptions travel in TaskSubmitted itself: no query needed.
        const data = (event.data ?? {}) as { tenantId?: unknown; webhook?: unknown; notify?: unknown };
        const hook = WebhookConfig.nullable().safeParse(data.webhook ?? null);
        const notify = NotifyConfig.nullable().safeParse(data.notify ?? null);
        if (hook.success && notify.success && typeof data.tenantId === 'string') remember(event.taskId, { tenantId: data.tenantId, webhook: hook.data, notify: notify.data });
      }
      // A fork's copied history notifies nobody but for the requests it reopened (webhookMessagesFor, plannedMails); known here without reading the task.
      if (!notifiesAnyone(event)) return;
      const subs = await subscriptionsOf(event.taskId);
      const targets = await targetsOf(event, subs);
      // Sent again (a retry): what an endpoint deleted, or changed to no longer take the type, was
      // still owed is given up, said — not left reading like a retry to come.
      if (ctx.deliveryCount > 1) await giveUpDroppedTargets(event, targets);
      const logged = loggedEvent(d.store, event);
      const hookOutcome = targets.length > 0 ? await deliverWebhooks(event, { ctx }, targets, logged) : undefined;
      const mailRetry = mail && (subs.notify || event.type === 'EmailRequested') ? await deliverMails(mail, event, ctx.lastAttempt, logged) : null;
      if (hookOutcome) return hookOutcome;
      if (mailRetry) return retry(mailRetry.reason, mailRetry.delayMs);
    },
  });

  /** Messages owed to endpoints that no longer take them (deleted, or their types changed): each given up, as its next attempt, saying why. */
  async function giveUpDroppedTargets(event: BusEvent, targets: Target[]): Promise<void> {
    for (const owed of await owedToEndpoints(d.pool, event.taskId, event.id)) {
      const endpoint = targets.find((t) => t.endpointId === owed.endpointId);
      if (endpoint?.events.includes(owed.type)) continue;
      const why = endpoint ? `the endpoint no longer subscribes to ${owed.type}` : 'the endpoint was deleted';
      await recordNextAttempt(d.pool, { taskId: event.taskId, eventId: event.id, webhookId: owed.webhookId, type: owed.type, url: owed.url, statusCode: null, ok: false, error: `given up: ${why}`, durationMs: 0, redeliveryId: null, endpointId: owed.endpointId, givenUp: true });
      metrics.deliveries.inc({ channel: 'webhook', outcome: 'failed' });
      d.log.warn({ taskId: event.taskId, endpointId: owed.endpointId, type: owed.type }, `webhook given up: ${why}`);
    }
  }

  /** Where the event's webhook messages go: the task's own webhook and its tenant's endpoints. */
  async function targetsOf(event: BusEvent, subs: Subscriptions): Promise<Target[]> {
    return [
      ...(subs.webhook ? [{ url: subs.webhook.url, events: subs.webhook.events, secrets: await ownWebhookSecrets(subs.tenantId), endpointId: null }] : []),
      // An endpoint serves the transitions committed after it was made: a retry of an older event (another target failing) does not reach it.
      ...(subs.tenantId ? await endpointsOf(subs.tenantId, { trustEmpty: hasOwnTargets(subs) }) : []).filter((e) => endpointServes(e, event)).map((e) => ({ url: e.url, events: e.events, secrets: validSecrets(e, d.now()), endpointId: e.id })),
    ];
  }

  /**
   * The event's webhook messages each target subscribed to (webhookMessagesFor: its type, the task's
   * status change, a subagent's moment), each signed, delivered and the attempt recorded. A message
   * a target has settled (delivered, or 410 Gone) is skipped, so a retry re-sends only what failed;
   * the retry waits as long as the most patient failing receiver asked (`Retry-After`). On the
   * last attempt allowed, each failure is recorded as the one after which nobody tries again;
   * `givenUp` (a message back past its deliveries unsettled): nothing is sent, each is given up.
   */
  async function deliverWebhooks(event: BusEvent, how: { ctx: HandlerContext } | { givenUp: string }, targets: Target[], logged: () => Promise<LoggedEvent | null>): Promise<Outcome | undefined> {
    const wanted = targets.filter((t) => t.events.includes(`event.${event.type}`) || needsState(t.events));
    if (wanted.length === 0) return undefined;
    const read = await logged();
    if (!read) return undefined;
    const { events, recorded } = read;
    const before = fold(events.filter((e) => e.position < recorded.position));
    const after = fold([recorded], before);
    const messages = webhookMessagesFor(recorded, before, after);
    let wait: { reason: string; delayMs: number } | null = null;
    let failed = 0;
    for (const t of wanted) {
      for (const m of messages) {
        if (!t.events.includes(m.type)) continue;
        const webhookId = webhookIdOf(event.id, m.type);
        // Settled already: the bus was re-fed from the log, or the event came again for another target, message or its mail.
        if (await targetSettled(d.pool, event.taskId, webhookId, t.endpointId, redactCredentials(t.url))) continue;
        if ('givenUp' in how) {
          // Not sent: given up, as its next attempt (`/deliveries`, `--given-up`), nothing more to come.
          await recordNextAttempt(d.pool, { taskId: event.taskId, eventId: event.id, webhookId, type: m.type, url: redactCredentials(t.url), statusCode: null, ok: false, error: `given up: ${how.givenUp}`, durationMs: 0, redeliveryId: null, endpointId: t.endpointId, givenUp: true });
          metrics.deliveries.inc({ channel: 'webhook', outcome: 'failed' });
          continue;
        }
        const { ctx } = how;
        // Given up at the attempts allowed as the ledger counts them (the bus counts a notifier that died mid-send too; it allows some more).
        const r = await sendMessage({ taskId: event.taskId, eventId: event.id, webhookId, message: m, event: recorded, state: after, url: t.url, secrets: t.secrets, endpointId: t.endpointId, redeliveryId: null, lastAttempt: ctx.lastAttempt, giveUpAt: d.maxAttempts });
        if (r.ok || r.gone || r.givenUp) continue;
        failed++;
        const delayMs = nextRetryDelay(d.backoffMs, r.attempt, r.retryAfterMs);
        if (!wait || delayMs > wait.delayMs) wait = { reason: r.error ?? 'failed', delayMs };
      }
    }
    if (!wait) return undefined;
    return retry(failed > 1 ? `${failed} messages not delivered; the longest wait asked: ${wait.reason}` : wait.reason, wait.delayMs);
  }
  // A claim outlasts the longest send it covers: a webhook's three timeouts, or a mail's lease.
  const redeliveries = startRedeliveries({ ...d, agent, mail, everyMs: d.redeliverEveryMs ?? 1000, leaseMs: Math.max(3 * d.timeoutMs + 10_000, mail?.leaseMs ?? 0) });
  return {
    get inFlight() {
      return consumer.inFlight;
    },
    async stop() {
      await redeliveries.stop();
      await topology?.stop();
      await consumer.stop();
      await agent.close();
    },
  };
}
