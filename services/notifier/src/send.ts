import { publicEventView, toAgentViews, toEventView, toTaskView, redactCredentials } from '@baton/api';
import { failSpan, inSpan, metrics, SpanKind } from '@baton/telemetry';
import type { RecordedEvent, TaskState } from '@baton/domain';
import type { Logger } from '@baton/runtime';
import { recordNextAttempt } from '@baton/storage';
import type pg from 'pg';
import type { Dispatcher } from 'undici';
import { deliver, signAll, type DeliveryResult, type WebhookMessage } from './webhook.ts';

export interface SendDeps {
  pool: pg.Pool;
  log: Logger;
  timeoutMs: number;
  now: () => Date;
  /** The connections webhooks go through: `webhookAgent`, which refuses non-public addresses unless allowed. */
  agent: Dispatcher;
}

/** One message to send: the event's webhook message, the task as it stood after the event, where to (its attempt is numbered when recorded). */
export interface Message {
  taskId: string;
  eventId: string;
  webhookId: string;
  message: WebhookMessage;
  /** The event the message is about (an `event.*` message carries it). */
  event: RecordedEvent;
  state: TaskState;
  url: string;
  /** Signs it: a task's own webhook its tenant's key or the deployment's secret (taskWebhookSecrets), an endpoint its valid secrets. */
  secrets: string[];
  /** The tenant's endpoint it goes to; null: the task's own webhook. */
  endpointId: string | null;
  /** Set when a person asked for it again (POST …/deliveries/:deliveryId/redeliver). */
  redeliveryId: string | null;
  /** The last automatic attempt allowed: a failure is recorded as given up (a 410 Gone always is). */
  lastAttempt: boolean;
  /** A failure numbered this or later (the message's attempts to the target, as recorded) is given up: the attempts allowed. */
  giveUpAt?: number;
}

/** A message's webhook-id: one per (event, type), the same on every attempt and redelivery. */
export const webhookIdOf = (eventId: string, type: string): string => `msg_${eventId}_${type.replace(/\./g, '_')}`;

/**
 * The body (docs/webhooks.md): `{type, timestamp, data: {task, request?, agent?, event?}}`;
 * request.opened messages carry the request (as the task's pendingRequests show it), agent.*
 * messages the agent, event.* messages the event as `GET /v1/tasks/:id/events` lists it
 * (publicEventView).
 */
export function payloadOf(m: WebhookMessage, state: TaskState, event: RecordedEvent, timestamp: number): string {
  const task = toTaskView(state);
  const agent = m.agentId ? toAgentViews(state).find((a) => a.id === m.agentId) : undefined;
  const shown = m.type.startsWith('event.') ? { event: publicEventView(toEventView(event)) } : {};
  const request = m.requestId ? { request: task.pendingRequests.find((r) => r.requestId === m.requestId) ?? null } : {};
  return JSON.stringify({ type: m.type, timestamp: new Date(timestamp * 1000).toISOString(), data: { task, ...request, ...(agent ? { agent } : {}), ...shown } });
}

/**
 * An attempt as `baton_deliveries_total` counts it, as for mail: `failed` is given up (the last
 * attempt allowed, or a person's redelivery, which is tried once), `retried` a failure the
 * notifiers try again — so a panel or alert on `failed` counts what nobody will send any more.
 */
export const deliveryOutcome = (r: Pick<DeliveryResult, 'ok' | 'gone'>, s: Pick<Message, 'lastAttempt' | 'redeliveryId'>): 'delivered' | 'gone' | 'failed' | 'retried' =>
  r.ok ? 'delivered' : r.gone ? 'gone' : s.lastAttempt || s.redeliveryId !== null ? 'failed' : 'retried';

/** Sign, deliver and record one attempt (failed or not). */
export async function sendMessage(d: SendDeps, s: Message): Promise<DeliveryResult & { attempt: number; givenUp: boolean }> {
  const timestamp = Math.floor(d.now().getTime() / 1000);
  const body = payloadOf(s.message, s.state, s.event, timestamp);
  const headers = { 'webhook-id': s.webhookId, 'webhook-timestamp': String(timestamp), 'webhook-signature': signAll(s.secrets, s.webhookId, timestamp, body) };
  // Credentials in a URL (registered before the gateway refused them) are never stored, logged or traced.
  const url = redactCredentials(s.url);
  const r: DeliveryResult = await inSpan('POST', { kind: SpanKind.CLIENT, attributes: { 'http.request.method': 'POST', 'url.full': url, 'baton.task_id': s.taskId, 'baton.webhook.type': s.message.type, 'baton.delivery.redelivery': s.redeliveryId !== null } }, async (span) => {
    // Refused (a non-public address), unresolvable, unreachable: a failed attempt like any other.
    const res = await deliver(s.url, headers, body, d.timeoutMs, d.agent);
    if (res.status !== null) span.setAttribute('http.response.status_code', res.status);
    if (!res.ok) failSpan(span, new Error(redactCredentials(res.error ?? 'failed')));
    return res;
  });
  const error = r.error === null ? null : redactCredentials(r.error);
  // Numbered as it is recorded: an automatic retry and a person's redelivery ending at once get two numbers.
  const { attempt, givenUp } = await recordNextAttempt(d.pool, { taskId: s.taskId, eventId: s.eventId, webhookId: s.webhookId, type: s.message.type, url, statusCode: r.status, ok: r.ok, error, durationMs: r.durationMs, redeliveryId: s.redeliveryId, endpointId: s.endpointId, givenUp: !r.ok && (r.gone || s.lastAttempt), ...(s.giveUpAt !== undefined ? { giveUpAt: s.giveUpAt } : {}) });
  metrics.deliveries.inc({ channel: 'webhook', outcome: deliveryOutcome(r, { lastAttempt: givenUp, redeliveryId: s.redeliveryId }) });
  metrics.deliverySeconds.observe({ channel: 'webhook' }, r.durationMs / 1000);
  if (!r.ok) d.log.warn({ taskId: s.taskId, url, attempt, redelivery: s.redeliveryId !== null, error, givenUp }, 'webhook delivery failed');
  return { ...r, attempt, givenUp };
}
