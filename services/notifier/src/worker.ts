import { BusEvent, deadLetterRecorder, retry, startConsumer, TopologyWatch, type BusNames, type RunningConsumer, type TopologyOptions } from '@baton/bus';
import { fold, taskStreamId, WebhookConfig } from '@baton/domain';
import { redactCredentials, toTaskView } from '@baton/api';
import type { EventStore } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import { recordDelivery, wasDelivered } from '@baton/storage';
import { jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import { assertPublicUrl } from './egress.ts';
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
}

/**
 * Delivers per-task webhooks. One NATS message = one event = at most one delivery, retried
 * with backoff (the consumer's nak delay) until it succeeds or attempts run out; every
 * attempt is a row in webhook_deliveries. The notifier never writes task state.
 */
export async function startNotifier(d: NotifierDeps): Promise<RunningConsumer> {
  // A task's webhook never changes after submission: cache it (bounded) so most events cost no query.
  const cache = new Map<string, WebhookConfig | null>();
  const webhookOf = async (taskId: string): Promise<WebhookConfig | null> => {
    if (cache.has(taskId)) return cache.get(taskId) ?? null;
    const first = (await d.store.readStream(taskStreamId(taskId), 0, 1))[0];
    const hook = first?.type === 'TaskSubmitted' ? first.data.webhook : null;
    remember(taskId, hook);
    return hook;
  };
  function remember(taskId: string, hook: WebhookConfig | null): void {
    if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    cache.set(taskId, hook);
  }

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
    // Tasks known to have no webhook: ack without even parsing the message.
    prefilter: (subject) => {
      const taskId = subject.split('.')[d.names.taskIdToken];
      return !(taskId && cache.has(taskId) && cache.get(taskId) === null);
    },
    handle: async (event, ctx) => {
      if (event.type === 'TaskSubmitted' && !cache.has(event.taskId)) {
        // The webhook travels in TaskSubmitted itself: no query needed.
        const hook = WebhookConfig.nullable().safeParse((event.data as { webhook?: unknown } | null)?.webhook ?? null);
        if (hook.success) remember(event.taskId, hook.data);
      }
      const hook = await webhookOf(event.taskId);
      if (!hook) return;
      const type = webhookTypesFor(event.type).find((t) => hook.events.includes(t));
      if (!type) return;
      const events = await d.store.readTask(event.taskId);
      const upTo = events.filter((e) => e.position <= BigInt(event.position));
      const task = toTaskView(fold(upTo));
      const webhookId = `msg_${event.id}`;
      if (ctx.deliveryCount === 1 && (await wasDelivered(d.pool, event.taskId, webhookId))) return;
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
      if (r.ok || r.gone) return;
      d.log.warn({ taskId: event.taskId, url, attempt: ctx.deliveryCount, error }, 'webhook delivery failed');
      return retry(r.error ?? 'failed', r.retryAfterMs ?? undefined);
    },
  });
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
