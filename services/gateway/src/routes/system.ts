import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';
import { CONSOLE_HTML } from './console.ts';

export const systemRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    const checks: Record<string, string> = {};
    try {
      await d.pool.query('select 1');
      checks.postgres = 'ok';
    } catch (err) {
      checks.postgres = `unreachable: ${(err as Error).message}`;
    }
    const nc = d.nats();
    checks.nats = nc && !nc.isClosed() && !nc.isDraining() ? 'ok' : 'unreachable';
    const ok = Object.values(checks).every((v) => v === 'ok');
    return reply.status(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not_ready', checks });
  });

  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => reply.type('text/plain; version=0.0.4').send(d.metrics.render()));

  app.get('/v1/teams', { schema: { tags: ['teams'], summary: 'Configured teams and their agents' } }, async () => ({
    items: Object.values(d.teams).map((t) => ({
      id: t.id,
      description: t.description,
      lead: { id: t.lead.id, name: t.lead.name, model: t.lead.model, tools: t.lead.tools, delegatesTo: t.lead.delegatesTo ?? [], ...(t.lead.reviewAgent ? { reviewAgent: t.lead.reviewAgent } : {}) },
      agents: Object.values(t.agents).map((a) => ({ id: a.id, name: a.name, model: a.model, tools: a.tools })),
    })),
  }));

  app.get('/', { schema: { hide: true } }, async (_req, reply) => reply.type('text/html; charset=utf-8').send(CONSOLE_HTML));
};
