import { randomBytes } from 'node:crypto';
import { redactCredentials, webhookUrlProblem, type TaskWebhookSecretView, type WebhookEndpointView } from '@baton/api';
import {
  createEndpointUnderCap,
  createTaskWebhookSecret,
  deleteEndpoint,
  findTaskWebhookSecret,
  listEndpoints,
  rotateEndpointSecret,
  rotateTaskWebhookSecret,
  tenantEndpoint,
  updateEndpoint,
  type TaskWebhookSecret,
  type WebhookEndpoint,
} from '@baton/storage';
import type { ZodTypeProvider } from '@fastify/type-provider-zod';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';
import { HttpError, notFound } from '../errors.ts';
import { DEFAULT_ROTATION_OVERLAP_SECONDS, NoBody, OverlapBody, RotateSecretBody, succeedsWith, WebhookBody, WebhookIdParams, WebhookPatchBody } from './schemas.ts';

/** A tenant has at most this many endpoints. */
export const MAX_ENDPOINTS_PER_TENANT = 20;

/** A new signing secret: `whsec_` + base64 of 24 random bytes (Standard Webhooks). */
const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** An endpoint as listed: never its secrets (they are shown once, when made). */
const view = (e: WebhookEndpoint): WebhookEndpointView => ({
  id: e.id,
  url: redactCredentials(e.url),
  events: e.events,
  createdAt: e.createdAt.toISOString(),
  rotatedAt: e.rotatedAt?.toISOString() ?? null,
  previousSecretExpiresAt: e.previousExpiresAt?.toISOString() ?? null,
});

/** How long the secret replaced signs beside the new one: the body's overlapSeconds, else a day. */
const overlapMs = (body: { overlapSeconds?: number | undefined } | null | undefined): number => (body?.overlapSeconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS) * 1000;

/** A rotation refused while the last one's previous secret still signs (a second would stop it at once). */
const rotationInProgress = (what: 'secret' | 'key', until: Date | null): HttpError =>
  new HttpError(
    409,
    'rotation_in_progress',
    `the previous ${what} still signs until ${until?.toISOString() ?? 'the end of the last rotation\'s overlap'}: rotating again now would stop it at once, and receivers still holding it would fail. Rotate again after that, or send dropPrevious: true (the CLI's --drop-previous) to stop it now`,
  );

/** The tenant's key for its tasks' own webhooks as shown: never the key itself. */
const keyView = (k: TaskWebhookSecret): TaskWebhookSecretView => ({
  createdAt: k.createdAt.toISOString(),
  rotatedAt: k.rotatedAt?.toISOString() ?? null,
  previousSecretExpiresAt: k.previousExpiresAt?.toISOString() ?? null,
  deploymentSecretUntil: k.deploymentSecretUntil?.toISOString() ?? null,
});

/**
 * A tenant's webhook endpoints (docs/webhooks.md): delivered for every task of the tenant, each
 * signed with the endpoint's own secret; the notifier reads them.
 */
export const webhookRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  /** A URL the notifier may send to (public, no credentials): else 400 naming what is wrong. */
  const checkUrl = (url: string): void => {
    const problem = webhookUrlProblem(url, { allowPrivateNetworks: d.allowPrivateWebhooks });
    if (problem) throw new HttpError(400, 'validation_error', `body.url: ${problem}`, [{ field: 'body.url', message: problem }]);
  };

  r.post('/v1/webhooks', { schema: { body: WebhookBody, response: succeedsWith(201, 'The endpoint, with its secret (shown here only)'), tags: ['webhooks'], summary: "Subscribe an endpoint to the webhooks of every task of the tenant (the answer shows its secret, once)" } }, async (req, reply) => {
    checkUrl(req.body.url);
    const e = await createEndpointUnderCap(d.pool, { id: d.newId(), tenantId: req.tenant, url: req.body.url, events: req.body.events, secret: newSecret() }, MAX_ENDPOINTS_PER_TENANT);
    if (!e) throw new HttpError(409, 'too_many_webhooks', `a tenant has at most ${MAX_ENDPOINTS_PER_TENANT} webhook endpoints; delete one first`);
    return reply.status(201).send({ ...view(e), secret: e.secret });
  });

  r.get('/v1/webhooks', { schema: { tags: ['webhooks'], summary: "The tenant's webhook endpoints (without their secrets)" } }, async (req) => {
    return { items: (await listEndpoints(d.pool, req.tenant)).map(view) };
  });

  r.get('/v1/webhooks/:webhookId', { schema: { params: WebhookIdParams, tags: ['webhooks'], summary: 'One endpoint (without its secrets)' } }, async (req) => {
    const e = await tenantEndpoint(d.pool, req.tenant, req.params.webhookId);
    if (!e) throw notFound(`webhook ${req.params.webhookId}`);
    return view(e);
  });

  r.patch('/v1/webhooks/:webhookId', { schema: { params: WebhookIdParams, body: WebhookPatchBody, tags: ['webhooks'], summary: 'Change an endpoint\'s URL or types, keeping its id and secrets (retries and redeliveries go to it as changed)' } }, async (req) => {
    if (req.body.url !== undefined) checkUrl(req.body.url);
    const e = await updateEndpoint(d.pool, { tenantId: req.tenant, id: req.params.webhookId, ...req.body });
    if (!e) throw notFound(`webhook ${req.params.webhookId}`);
    return view(e);
  });

  r.delete('/v1/webhooks/:webhookId', { schema: { params: WebhookIdParams, body: NoBody, response: succeedsWith(204, 'Deleted (no body)'), tags: ['webhooks'], summary: 'Delete an endpoint (no more deliveries to it)' } }, async (req, reply) => {
    if (!(await deleteEndpoint(d.pool, req.tenant, req.params.webhookId))) throw notFound(`webhook ${req.params.webhookId}`);
    return reply.status(204).send();
  });

  r.post('/v1/webhooks/:webhookId/rotate-secret', { schema: { params: WebhookIdParams, body: RotateSecretBody, tags: ['webhooks'], summary: 'A new secret; the previous one keeps signing too for overlapSeconds (default a day)' } }, async (req) => {
    const e = await rotateEndpointSecret(d.pool, { tenantId: req.tenant, id: req.params.webhookId, secret: newSecret(), overlapMs: overlapMs(req.body), dropPrevious: req.body?.dropPrevious === true });
    if (!e) {
      const now = await tenantEndpoint(d.pool, req.tenant, req.params.webhookId);
      if (!now) throw notFound(`webhook ${req.params.webhookId}`);
      throw rotationInProgress('secret', now.previousExpiresAt);
    }
    return { ...view(e), secret: e.secret };
  });

  // The tenant's key for its tasks' own webhooks (`webhook` in POST /v1/tasks): without one they are
  // signed with the deployment's WEBHOOK_SECRET, which no tenant can hold without signing for all.
  const noKey = () =>
    new HttpError(404, 'not_found', 'this tenant has no key for its tasks\' own webhooks: they are signed with the deployment\'s WEBHOOK_SECRET; POST /v1/task-webhook-secret makes one');

  r.post('/v1/task-webhook-secret', { schema: { body: OverlapBody, response: succeedsWith(201, 'The key, shown here only'), tags: ['webhooks'], summary: "A key of the tenant's own for its tasks' own webhooks (shown once); the deployment's secret keeps signing beside it for overlapSeconds (default a day)" } }, async (req, reply) => {
    const k = await createTaskWebhookSecret(d.pool, { tenantId: req.tenant, secret: newSecret(), deploymentOverlapMs: overlapMs(req.body) });
    if (!k) throw new HttpError(409, 'task_webhook_secret_exists', "this tenant has a key for its tasks' own webhooks already: POST /v1/task-webhook-secret/rotate replaces it");
    return reply.status(201).send({ ...keyView(k), secret: k.secret });
  });

  r.get('/v1/task-webhook-secret', { schema: { tags: ['webhooks'], summary: "The tenant's key for its tasks' own webhooks: when it was made and rotated, what signs beside it until when (never the key)" } }, async (req) => {
    const k = await findTaskWebhookSecret(d.pool, req.tenant);
    if (!k) throw noKey();
    return keyView(k);
  });

  r.post('/v1/task-webhook-secret/rotate', { schema: { body: RotateSecretBody, tags: ['webhooks'], summary: "A new key for the tenant's tasks' own webhooks; the previous one keeps signing too for overlapSeconds (default a day)" } }, async (req) => {
    const k = await rotateTaskWebhookSecret(d.pool, { tenantId: req.tenant, secret: newSecret(), overlapMs: overlapMs(req.body), dropPrevious: req.body?.dropPrevious === true });
    if (!k) {
      const now = await findTaskWebhookSecret(d.pool, req.tenant);
      if (!now) throw noKey();
      throw rotationInProgress('key', now.previousExpiresAt);
    }
    return { ...keyView(k), secret: k.secret };
  });
};
