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
}

/** A recorded attempt, as a task's delivery list shows it. */
export type RecordedDelivery = Omit<DeliveryAttempt, 'taskId' | 'channel'> & { channel: 'webhook' | 'email'; attemptedAt: Date };

export async function recordDelivery(pool: Pick<pg.Pool, 'query'>, a: DeliveryAttempt): Promise<void> {
  await pool.query(
    `insert into webhook_deliveries (task_id, event_id, webhook_id, type, url, attempt, status_code, ok, error, duration_ms, channel)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [a.taskId, a.eventId, a.webhookId, a.type, a.url, a.attempt, a.statusCode, a.ok, a.error, a.durationMs, a.channel ?? 'webhook'],
  );
}

/** Was this event's webhook delivered already? (A re-published event — the bus was re-fed from the log — is not sent twice.) */
export async function wasDelivered(pool: Pick<pg.Pool, 'query'>, taskId: string, webhookId: string): Promise<boolean> {
  const r = await pool.query('select 1 from webhook_deliveries where task_id = $1 and webhook_id = $2 and ok limit 1', [taskId, webhookId]);
  return (r.rowCount ?? 0) > 0;
}

/** A task's delivery attempts, in the order they were recorded. */
export async function listDeliveries(pool: Pick<pg.Pool, 'query'>, taskId: string): Promise<RecordedDelivery[]> {
  const { rows } = await pool.query(
    `select channel, webhook_id, event_id, type, url, attempt, status_code, ok, error, duration_ms, attempted_at
       from webhook_deliveries where task_id = $1 order by id`,
    [taskId],
  );
  return rows.map((r) => ({
    channel: r.channel,
    webhookId: r.webhook_id,
    eventId: r.event_id,
    type: r.type,
    url: r.url,
    attempt: r.attempt,
    statusCode: r.status_code,
    ok: r.ok,
    error: r.error,
    durationMs: r.duration_ms,
    attemptedAt: r.attempted_at,
  }));
}
