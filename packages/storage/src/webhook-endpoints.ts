import { inTransaction } from '@baton/db';
import type pg from 'pg';

/** A tenant's webhook subscription (POST /v1/webhooks): delivered for every task of the tenant. */
export interface WebhookEndpoint {
  id: string;
  tenantId: string;
  url: string;
  events: string[];
  /** Signs every message; `whsec_…`. */
  secret: string;
  /** The secret before the last rotation, signing too until `previousExpiresAt`. */
  previousSecret: string | null;
  previousExpiresAt: Date | null;
  createdAt: Date;
  rotatedAt: Date | null;
}

const COLUMNS = 'id, tenant_id, url, events, secret, previous_secret, previous_expires_at, created_at, rotated_at';
const toEndpoint = (r: Record<string, unknown>): WebhookEndpoint => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  url: r.url as string,
  events: r.events as string[],
  secret: r.secret as string,
  previousSecret: r.previous_secret as string | null,
  previousExpiresAt: r.previous_expires_at as Date | null,
  createdAt: r.created_at as Date,
  rotatedAt: r.rotated_at as Date | null,
});

/** The secrets that sign a message now: the current one, and the previous one while its overlap lasts. */
export const validSecrets = (e: Pick<WebhookEndpoint, 'secret' | 'previousSecret' | 'previousExpiresAt'>, now: Date): string[] =>
  e.previousSecret && e.previousExpiresAt && e.previousExpiresAt.getTime() > now.getTime() ? [e.secret, e.previousSecret] : [e.secret];

export async function createEndpoint(pool: Pick<pg.Pool, 'query'>, e: { id: string; tenantId: string; url: string; events: string[]; secret: string }): Promise<WebhookEndpoint> {
  const { rows } = await pool.query(`insert into webhook_endpoints (id, tenant_id, url, events, secret) values ($1, $2, $3, $4, $5) returning ${COLUMNS}`, [e.id, e.tenantId, e.url, e.events, e.secret]);
  return toEndpoint(rows[0]);
}

/**
 * Create an endpoint unless the tenant has `max` already (null then). Creations of one tenant take
 * turns (a transaction-scoped advisory lock), so concurrent requests cannot go past the cap
 * between counting and inserting.
 */
export async function createEndpointUnderCap(pool: pg.Pool, e: { id: string; tenantId: string; url: string; events: string[]; secret: string }, max: number): Promise<WebhookEndpoint | null> {
  return inTransaction(pool, async (client) => {
    await client.query(`select pg_advisory_xact_lock(hashtext('baton.webhook_endpoints'), hashtext($1))`, [e.tenantId]);
    const { rows } = await client.query<{ n: number }>('select count(*)::int as n from webhook_endpoints where tenant_id = $1', [e.tenantId]);
    if ((rows[0]?.n ?? 0) >= max) return null;
    return createEndpoint(client, e);
  });
}

/** The tenants that have at least one endpoint (what the relay asks: does the notifier serve this tenant's tasks?). */
export async function tenantsWithEndpoints(pool: Pick<pg.Pool, 'query'>): Promise<string[]> {
  const { rows } = await pool.query<{ tenant_id: string }>('select distinct tenant_id from webhook_endpoints');
  return rows.map((r) => r.tenant_id);
}

/** A tenant's endpoints, oldest first. */
export async function listEndpoints(pool: Pick<pg.Pool, 'query'>, tenantId: string): Promise<WebhookEndpoint[]> {
  const { rows } = await pool.query(`select ${COLUMNS} from webhook_endpoints where tenant_id = $1 order by created_at, id`, [tenantId]);
  return rows.map(toEndpoint);
}

export async function findEndpoint(pool: Pick<pg.Pool, 'query'>, id: string): Promise<WebhookEndpoint | null> {
  const { rows } = await pool.query(`select ${COLUMNS} from webhook_endpoints where id = $1`, [id]);
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/** A tenant's endpoint (null: no such endpoint of the tenant). */
export async function tenantEndpoint(pool: Pick<pg.Pool, 'query'>, tenantId: string, id: string): Promise<WebhookEndpoint | null> {
  const { rows } = await pool.query(`select ${COLUMNS} from webhook_endpoints where tenant_id = $1 and id = $2`, [tenantId, id]);
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/**
 * Change where an endpoint is sent and for which types, keeping its id and secrets (receivers go
 * on verifying; null: no such endpoint of the tenant). What is retried or sent again after goes
 * to it as it is then.
 */
export async function updateEndpoint(pool: Pick<pg.Pool, 'query'>, u: { tenantId: string; id: string; url?: string; events?: string[] }): Promise<WebhookEndpoint | null> {
  const { rows } = await pool.query(
    `update webhook_endpoints set url = coalesce($3, url), events = coalesce($4::text[], events) where tenant_id = $1 and id = $2 returning ${COLUMNS}`,
    [u.tenantId, u.id, u.url ?? null, u.events ?? null],
  );
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/** Delete a tenant's endpoint (false: no such endpoint of the tenant). */
export async function deleteEndpoint(pool: Pick<pg.Pool, 'query'>, tenantId: string, id: string): Promise<boolean> {
  const r = await pool.query('delete from webhook_endpoints where tenant_id = $1 and id = $2', [tenantId, id]);
  return (r.rowCount ?? 0) > 0;
}

/**
 * A new secret; the current one becomes the previous, valid `overlapMs` more (null: no such
 * endpoint of the tenant, or — unless `dropPrevious` — one whose previous secret still signs:
 * rotating again would stop that one at once, failing receivers that still hold it).
 */
export async function rotateEndpointSecret(pool: Pick<pg.Pool, 'query'>, r: { tenantId: string; id: string; secret: string; overlapMs: number; dropPrevious?: boolean }): Promise<WebhookEndpoint | null> {
  const { rows } = await pool.query(
    `update webhook_endpoints set previous_secret = secret, secret = $3, previous_expires_at = now() + make_interval(secs => $4::double precision / 1000), rotated_at = now()
      where tenant_id = $1 and id = $2 and (previous_expires_at is null or previous_expires_at <= now() or $5) returning ${COLUMNS}`,
    [r.tenantId, r.id, r.secret, r.overlapMs, r.dropPrevious === true],
  );
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/**
 * A tenant's key for its tasks' own webhooks (`POST /v1/task-webhook-secret`, migration 021):
 * signs them instead of the deployment's `WEBHOOK_SECRET`, which signs beside it until
 * `deploymentSecretUntil` (receivers move over meanwhile).
 */
export interface TaskWebhookSecret {
  tenantId: string;
  secret: string;
  previousSecret: string | null;
  previousExpiresAt: Date | null;
  deploymentSecretUntil: Date | null;
  createdAt: Date;
  rotatedAt: Date | null;
}

const SECRET_COLUMNS = 'tenant_id, secret, previous_secret, previous_expires_at, deployment_secret_until, created_at, rotated_at';
const toTaskWebhookSecret = (r: Record<string, unknown>): TaskWebhookSecret => ({
  tenantId: r.tenant_id as string,
  secret: r.secret as string,
  previousSecret: r.previous_secret as string | null,
  previousExpiresAt: r.previous_expires_at as Date | null,
  deploymentSecretUntil: r.deployment_secret_until as Date | null,
  createdAt: r.created_at as Date,
  rotatedAt: r.rotated_at as Date | null,
});

/** Give a tenant its key, the deployment's secret signing beside it for `deploymentOverlapMs` (null: it has one already). */
export async function createTaskWebhookSecret(pool: Pick<pg.Pool, 'query'>, s: { tenantId: string; secret: string; deploymentOverlapMs: number }): Promise<TaskWebhookSecret | null> {
  const { rows } = await pool.query(
    `insert into task_webhook_secrets (tenant_id, secret, deployment_secret_until) values ($1, $2, now() + make_interval(secs => $3::double precision / 1000))
     on conflict (tenant_id) do nothing returning ${SECRET_COLUMNS}`,
    [s.tenantId, s.secret, s.deploymentOverlapMs],
  );
  return rows[0] ? toTaskWebhookSecret(rows[0]) : null;
}

/** The tenant's key for its tasks' own webhooks (null: it has none; they are signed with the deployment's secret). */
export async function findTaskWebhookSecret(pool: Pick<pg.Pool, 'query'>, tenantId: string): Promise<TaskWebhookSecret | null> {
  const { rows } = await pool.query(`select ${SECRET_COLUMNS} from task_webhook_secrets where tenant_id = $1`, [tenantId]);
  return rows[0] ? toTaskWebhookSecret(rows[0]) : null;
}

/** A new key; the current one becomes the previous, valid `overlapMs` more (null: the tenant has none, or — unless `dropPrevious` — its previous key still signs, as for an endpoint). */
export async function rotateTaskWebhookSecret(pool: Pick<pg.Pool, 'query'>, r: { tenantId: string; secret: string; overlapMs: number; dropPrevious?: boolean }): Promise<TaskWebhookSecret | null> {
  const { rows } = await pool.query(
    `update task_webhook_secrets set previous_secret = secret, secret = $2, previous_expires_at = now() + make_interval(secs => $3::double precision / 1000), rotated_at = now()
      where tenant_id = $1 and (previous_expires_at is null or previous_expires_at <= now() or $4) returning ${SECRET_COLUMNS}`,
    [r.tenantId, r.secret, r.overlapMs, r.dropPrevious === true],
  );
  return rows[0] ? toTaskWebhookSecret(rows[0]) : null;
}

/**
 * What signs a task's own webhook now: the deployment's secret while its tenant has no key; else
 * the key (and the previous one while its overlap lasts), and the deployment's secret too until
 * `deploymentSecretUntil`.
 */
export const taskWebhookSecrets = (own: TaskWebhookSecret | null, deploymentSecret: string, now: Date): string[] =>
  !own ? [deploymentSecret] : [...validSecrets(own, now), ...(own.deploymentSecretUntil && own.deploymentSecretUntil.getTime() > now.getTime() ? [deploymentSecret] : [])];
