import { inTransaction } from '@baton/db';
import type pg from 'pg';

/**
 * One attempt to deliver a webhook or a mail (the notifier records every one, failed or not). A
 * mail's `webhookId` is its delivery id (`mail_<…>`), `type` `email.<moment>`, `url`
 * `mailto:<recipients>`, `statusCode` the SMTP reply code.
 */
export interface DeliveryAttempt {
  /** Absent: webhook. */
  channel?: 'webhook' | 'email';
  taskId: string;
  eventId: string;
  webhookId: string;
  type: string;
  url: string;
  attempt: number;
  statusCode: number | null;
  ok: boolean;
  error: string | null;
  durationMs: number;
  /** Set when a person asked for the attempt (a redelivery request's id). */
  redeliveryId?: string | null;
  /** The tenant's endpoint it went to (POST /v1/webhooks); absent: the task's own webhook. */
  endpointId?: string | null;
  /** The notifiers try no more after this attempt (the last allowed failed, or 410 Gone). Absent: false. */
  givenUp?: boolean;
}

/** A recorded attempt, as a task's delivery list shows it. */
export type RecordedDelivery = Omit<DeliveryAttempt, 'taskId' | 'channel' | 'redeliveryId' | 'endpointId' | 'givenUp'> & { id: string; channel: 'webhook' | 'email'; endpointId: string | null; redelivery: boolean; givenUp: boolean; attemptedAt: Date };

// Recorded once it has ended: `attempted_at` is when it began (its duration before now), as a delivery list reads it.
const INSERT_DELIVERY = `insert into webhook_deliveries (task_id, event_id, webhook_id, type, url, attempt, status_code, ok, error, duration_ms, channel, redelivery_id, endpoint_id, given_up, attempted_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, now() - $15::float8 * interval '1 millisecond')`;
const deliveryValues = (a: DeliveryAttempt): unknown[] => [a.taskId, a.eventId, a.webhookId, a.type, a.url, a.attempt, a.statusCode, a.ok, a.error, a.durationMs, a.channel ?? 'webhook', a.redeliveryId ?? null, a.endpointId ?? null, a.givenUp ?? false, a.durationMs];

/** Record an attempt numbered by its caller (a mail's claim numbers its own). */
export async function recordDelivery(pool: Pick<pg.Pool, 'query'>, a: DeliveryAttempt): Promise<void> {
  await pool.query(INSERT_DELIVERY, deliveryValues(a));
}

/**
 * Record an attempt as the message's next to its target, numbered when it is recorded: the
 * message's attempts take turns (a transaction-scoped advisory lock), so an automatic retry and
 * a person's redelivery that end at once get two numbers, not one twice. A person's redelivery
 * that fails after the notifiers gave the message up is given up too (nothing else will try it);
 * an automatic failure that is the `giveUpAt`-th automatic attempt or later is given up (the
 * attempts allowed, counted here, not by the bus: a notifier that died while sending is not one; a
 * person's redelivery is not one either). Returns its number, and whether it was given up.
 */
export async function recordNextAttempt(pool: pg.Pool, a: Omit<DeliveryAttempt, 'attempt'> & { giveUpAt?: number }): Promise<{ attempt: number; givenUp: boolean }> {
  return inTransaction(pool, async (client) => {
    await client.query(`select pg_advisory_xact_lock(hashtext('baton.webhook_deliveries'), hashtext($1 || ' ' || $2 || ' ' || coalesce($3, '')))`, [a.taskId, a.webhookId, a.endpointId ?? null]);
    const { rows } = await client.query<{ n: number; given_up: boolean; automatic: number }>(
      `select coalesce(max(attempt), 0)::int + 1 as n, coalesce(bool_or(given_up), false) as given_up, (count(*) filter (where redelivery_id is null))::int as automatic
         from webhook_deliveries where task_id = $1 and webhook_id = $2 and endpoint_id is not distinct from $3`,
      [a.taskId, a.webhookId, a.endpointId ?? null],
    );
    const attempt = rows[0]?.n ?? 1;
    // The automatic attempts allowed are counted among the automatic ones (a person's redelivery uses none up).
    const automatic = (rows[0]?.automatic ?? 0) + (a.redeliveryId == null ? 1 : 0);
    const givenUp = (a.givenUp ?? false) || (!a.ok && a.redeliveryId != null && rows[0]?.given_up === true) || (!a.ok && a.redeliveryId == null && a.giveUpAt !== undefined && automatic >= a.giveUpAt);
    await client.query(INSERT_DELIVERY, deliveryValues({ ...a, attempt, givenUp }));
    return { attempt, givenUp };
  });
}

/**
 * Has a message settled with one target: delivered, its URL as it is now (`url`, as recorded:
 * without credentials) said 410 Gone, or the notifiers gave it up? (A re-published event — the bus
 * re-fed from the log — or a retry for another target sends it no more; an endpoint moved to
 * another URL since its 410 is tried there; a person's redelivery is not automatic and is not asked.)
 */
export async function targetSettled(pool: Pick<pg.Pool, 'query'>, taskId: string, webhookId: string, endpointId: string | null, url: string): Promise<boolean> {
  const { rows } = await pool.query(
    `select coalesce(bool_or(ok or (status_code = 410 and url = $4) or (given_up and redelivery_id is null and status_code is distinct from 410)), false) as settled from webhook_deliveries where task_id = $1 and webhook_id = $2 and endpoint_id is not distinct from $3`,
    [taskId, webhookId, endpointId, url],
  );
  return rows[0].settled;
}

/**
 * An event's webhook messages to tenant endpoints that failed and were neither delivered since,
 * answered 410, nor given up: what the notifiers still owe those endpoints (a retry of the
 * event sends them again — unless the endpoint is gone or no longer takes the type).
 */
export async function owedToEndpoints(pool: Pick<pg.Pool, 'query'>, taskId: string, eventId: string): Promise<{ webhookId: string; endpointId: string; type: string; url: string }[]> {
  const { rows } = await pool.query<{ webhook_id: string; endpoint_id: string; type: string; url: string }>(
    `select webhook_id, endpoint_id::text as endpoint_id, min(type) as type, (array_agg(url order by id desc))[1] as url
       from webhook_deliveries
      where task_id = $1 and event_id = $2 and channel = 'webhook' and endpoint_id is not null
      group by webhook_id, endpoint_id
     having not bool_or(ok or status_code = 410 or (given_up and redelivery_id is null))`,
    [taskId, eventId],
  );
  return rows.map((r) => ({ webhookId: r.webhook_id, endpointId: r.endpoint_id, type: r.type, url: r.url }));
}

const DELIVERY_COLUMNS = `d.id::text as id, d.task_id, channel, redelivery_id, endpoint_id, webhook_id, event_id, type, url, attempt, status_code, ok, error, duration_ms, given_up, attempted_at`;

/** A row of DELIVERY_COLUMNS (webhook_deliveries; its columns: @baton/db's schema) as the API's record. */
const deliveryOf = (r: pg.QueryResultRow): RecordedDelivery => ({
  id: r.id,
  channel: r.channel,
  endpointId: r.endpoint_id,
  redelivery: r.redelivery_id !== null,
  webhookId: r.webhook_id,
  eventId: r.event_id,
  type: r.type,
  url: r.url,
  attempt: r.attempt,
  statusCode: r.status_code,
  ok: r.ok,
  error: r.error,
  durationMs: r.duration_ms,
  givenUp: r.given_up,
  attemptedAt: r.attempted_at,
});

/** A task's delivery attempts, in the order they were recorded. */
export async function listDeliveries(pool: Pick<pg.Pool, 'query'>, taskId: string): Promise<RecordedDelivery[]> {
  // d.id, the number: a bare "id" is the text alias (10 before 2).
  const { rows } = await pool.query(`select ${DELIVERY_COLUMNS} from webhook_deliveries d where task_id = $1 order by d.id`, [taskId]);
  return rows.map(deliveryOf);
}

/**
 * What the notifiers gave up on across a tenant's tasks, newest first: each message (webhook to
 * one target, or mail) whose last attempt is given up — none since, a person's redelivery that
 * went through included. At most `limit`; `before` (an id) pages on.
 */
export async function listGivenUpDeliveries(pool: Pick<pg.Pool, 'query'>, o: { tenantId: string; limit: number; before?: string }): Promise<(RecordedDelivery & { taskId: string })[]> {
  const { rows } = await pool.query(
    `select ${DELIVERY_COLUMNS} from webhook_deliveries d join tasks t on t.id = d.task_id
      where d.given_up and t.tenant_id = $1 and ($3::bigint is null or d.id < $3::bigint)
        and not exists (select 1 from webhook_deliveries l where l.task_id = d.task_id and l.channel = d.channel and l.webhook_id = d.webhook_id
                          and l.url = d.url and l.endpoint_id is not distinct from d.endpoint_id and l.id > d.id)
      order by d.id desc limit $2`,
    [o.tenantId, o.limit, o.before ?? null],
  );
  return rows.map((r) => ({ ...deliveryOf(r), taskId: r.task_id }));
}

/** One recorded attempt of a task (null: no such delivery of that task). */
export async function findDelivery(pool: Pick<pg.Pool, 'query'>, taskId: string, deliveryId: string): Promise<{ id: string; channel: 'webhook' | 'email'; webhookId: string; endpointId: string | null; eventId: string; type: string; url: string } | null> {
  const { rows } = await pool.query('select id::text as id, channel, webhook_id, endpoint_id, event_id, type, url from webhook_deliveries where task_id = $1 and id = $2', [taskId, deliveryId]);
  const r = rows[0];
  return r ? { id: r.id, channel: r.channel, webhookId: r.webhook_id, endpointId: r.endpoint_id, eventId: r.event_id, type: r.type, url: r.url } : null;
}

/**
 * Ask for a delivery's message to be sent again (a notifier claims the request; docs/webhooks.md);
 * the id of the request. A request for the same delivery
 * still queued is that request (one open per delivery, by a unique index): asking twice sends once.
 */
export async function requestRedelivery(pool: Pick<pg.Pool, 'query'>, r: { taskId: string; deliveryId: string; requestedBy: string }): Promise<string> {
  for (;;) {
    const { rows } = await pool.query(
      `with ins as (insert into webhook_redeliveries (task_id, delivery_id, requested_by) values ($1, $2, $3)
                    on conflict (delivery_id) where done_at is null do nothing returning id)
       select id::text as id from ins
       union all
       select id::text from webhook_redeliveries where delivery_id = $2 and done_at is null and not exists (select 1 from ins)`,
      [r.taskId, r.deliveryId, r.requestedBy],
    );
    // Empty only if the open request was done between the insert and the look: ask again.
    if (rows[0]) return rows[0].id;
  }
}

/** A claimed redelivery request, with what its delivery sent. */
export interface ClaimedRedelivery {
  id: string;
  /** What the delivery asked about was: a webhook message or a mail. */
  channel: 'webhook' | 'email';
  endpointId: string | null;
  taskId: string;
  eventId: string;
  webhookId: string;
  type: string;
  /** Where the delivery asked about went. */
  url: string;
}

/**
 * Claim open redelivery requests for `leaseMs` (one notifier each: skip locked; a request whose
 * claimer stopped is claimed again once its lease ends).
 */
export async function claimRedeliveries(pool: Pick<pg.Pool, 'query'>, limit: number, leaseMs: number): Promise<ClaimedRedelivery[]> {
  const { rows } = await pool.query(
    `with claimed as (
       update webhook_redeliveries set claimed_until = now() + make_interval(secs => $2::double precision / 1000)
        where id in (select id from webhook_redeliveries where done_at is null and (claimed_until is null or claimed_until < now()) order by id limit $1 for update skip locked)
        returning id, task_id, delivery_id)
     select c.id::text as id, c.task_id, d.channel, d.endpoint_id, d.event_id, d.webhook_id, d.type, d.url from claimed c join webhook_deliveries d on d.id = c.delivery_id order by c.id`,
    [limit, leaseMs],
  );
  return rows.map((r) => ({ id: r.id, channel: r.channel, endpointId: r.endpoint_id, taskId: r.task_id, eventId: r.event_id, webhookId: r.webhook_id, type: r.type, url: r.url }));
}

export async function finishRedelivery(pool: Pick<pg.Pool, 'query'>, id: string): Promise<void> {
  await pool.query('update webhook_redeliveries set done_at = now() where id = $1', [id]);
}

