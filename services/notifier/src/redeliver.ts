import { fold } from '@baton/domain';
import { isConnectionError } from '@baton/runtime';
import type { EventStore } from '@baton/event-store';
import { claimRedeliveries, findEndpoint, findTaskWebhookSecret, finishRedelivery, recordNextAttempt, taskWebhookSecrets, validSecrets, type ClaimedRedelivery } from '@baton/storage';
import { resendMail, type MailDeps } from './mail.ts';
import { sendMessage, type SendDeps } from './send.ts';
import { webhookMessageOf } from './webhook.ts';

export interface RedeliveryDeps extends SendDeps {
  store: EventStore;
  /** The deployment's `WEBHOOK_SECRET`: signs a task's own webhook while its tenant has no key of its own (taskWebhookSecrets). */
  secret: string;
  /** How often open requests are looked for. */
  everyMs: number;
  /** How long a claim holds a request (then another notifier may take it). */
  leaseMs: number;
  /** For a mail's delivery (null: mail is off). */
  mail: MailDeps | null;
}

/**
 * Redelivery requests (POST /v1/tasks/:id/deliveries/:deliveryId/redeliver): claimed from
 * webhook_redeliveries, each sent once more — a webhook message with the same webhook-id, type and
 * task as it stood after the event, a fresh timestamp and signature; a notification mail as it
 * would be made now (`resendMail`) — and recorded as the message's next attempt. One attempt per
 * request: a failed redelivery is recorded, not retried.
 */
export function startRedeliveries(d: RedeliveryDeps): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  // Failing looks in a row: the first is logged, the rest (a Postgres outage fails every look, each second) only at debug, until one works.
  let failing = 0;
  const tick = async (): Promise<void> => {
    try {
      // One claimed at a time, each under its own lease: a batch's lease ran out under slow sends and
      // another notifier took its tail while this one still sent it (each sent twice).
      for (let n = 0; n < 10 && !stopped; n++) {
        const [c] = await claimRedeliveries(d.pool, 1, d.leaseMs);
        if (!c) break;
        await redeliver(d, c);
      }
      if (failing > 0) d.log.info({ failedLooks: failing }, 'redeliveries: looking works again');
      failing = 0;
    } catch (err) {
      failing++;
      // Postgres away is an outage the pool reports itself: one line, not a stack.
      if (failing === 1 && isConnectionError(err)) d.log.warn({ error: (err as Error).message }, 'redeliveries: Postgres unreachable; looking again each second (further failures in a row at debug)');
      else if (failing === 1) d.log.error({ err }, 'redelivery failed (tried again at each next look; further failures in a row are logged at debug)');
      else d.log.debug({ err, failedLooks: failing }, 'redelivery failed again');
    }
  };
  const loop = (): void => {
    if (stopped) return;
    running = tick().finally(() => {
      if (!stopped) timer = setTimeout(loop, d.everyMs);
    });
  };
  loop();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

async function redeliver(d: RedeliveryDeps, c: ClaimedRedelivery): Promise<void> {
  if (c.channel === 'email') {
    await resendMail(d, d.mail, c);
    await finishRedelivery(d.pool, c.id);
    return;
  }
  const events = await d.store.readTask(c.taskId);
  const i = events.findIndex((e) => e.id === c.eventId);
  // A tenant endpoint's message goes to it as it is now (its URL and valid secrets); gone: not sent.
  const endpoint = c.endpointId ? await findEndpoint(d.pool, c.endpointId) : null;
  const task = fold(events);
  const own = task.webhook;
  const target = c.endpointId
    ? endpoint ? { url: endpoint.url, secrets: validSecrets(endpoint, d.now()) } : null
    : own ? { url: own.url, secrets: taskWebhookSecrets(task.tenantId ? await findTaskWebhookSecret(d.pool, task.tenantId) : null, d.secret, d.now()) } : null;
  const event = events[i];
  if (event && target) {
    await sendMessage(d, { taskId: c.taskId, eventId: c.eventId, webhookId: c.webhookId, message: webhookMessageOf(c.type, event), event, state: fold(events.slice(0, i + 1)), ...target, endpointId: c.endpointId, redeliveryId: c.id, lastAttempt: false });
  } else {
    // Not sent, and said where the person who asked will look: an attempt of the message, failed, naming why.
    const why = i < 0 ? 'the event is not in the task' : c.endpointId ? 'the endpoint was deleted' : 'the task has no webhook';
    d.log.warn({ taskId: c.taskId, redeliveryId: c.id, why }, 'redelivery not sent');
    await recordNextAttempt(d.pool, { taskId: c.taskId, eventId: c.eventId, webhookId: c.webhookId, type: c.type, url: c.url, statusCode: null, ok: false, error: `not sent: ${why}`, durationMs: 0, redeliveryId: c.id, endpointId: c.endpointId });
  }
  await finishRedelivery(d.pool, c.id);
}
