import { inspectTopology, relayStatus, topologyProblems } from '@baton/bus';
import { countStuckTasks } from '@baton/event-store';
import { jetstreamManager } from '@nats-io/jetstream';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';

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
    const natsUp = nc !== null && !nc.isClosed() && !nc.isDraining();
    checks.nats = natsUp ? 'ok' : 'unreachable';
    // The bus: its streams and consumers must exist (the services re-create them within seconds when lost).
    if (natsUp) {
      try {
        const problems = topologyProblems(await inspectTopology(await jetstreamManager(nc), d.names));
        checks.bus = problems.length === 0 ? 'ok' : problems.join('; ');
      } catch (err) {
        checks.bus = `cannot inspect: ${(err as Error).message}`;
      }
    }
    const ok = Object.values(checks).every((v) => v === 'ok');
    // The relay (in the orchestrators): reported, not failed on — this gateway still takes work while none leads; it is recorded and waits.
    const info: Record<string, string> = {};
    if (checks.postgres === 'ok') {
      try {
        const r = await relayStatus(d.pool);
        info.relay = !r.leading
          ? 'no relay is leading (is an orchestrator running?)'
          : r.oldestUnpublishedS !== null && r.oldestUnpublishedS > 30
            ? `leading, ${r.unpublished} transitions waiting, the oldest for ${Math.round(r.oldestUnpublishedS)} s`
            : 'ok';
      } catch (err) {
        info.relay = `cannot inspect: ${(err as Error).message}`;
      }
    }
    const degraded = Object.values(info).some((v) => v !== 'ok');
    return reply.status(ok ? 200 : 503).send({ status: ok ? (degraded ? 'degraded' : 'ready') : 'not_ready', checks: { ...checks, ...info } });
  });

  // Stuck tasks: counted when scraped (one indexed query), so the gauge needs no timer.
  let stuck = 0;
  d.metrics.gauge('baton_stuck_tasks', 'Tasks with work no person holds, no transition for STUCK_AFTER_MS and no live agent lease', () => stuck);
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    stuck = await countStuckTasks(d.kysely, d.limits.stuckAfterMs).catch(() => stuck);
    return reply.type('text/plain; version=0.0.4').send(d.metrics.render());
  });

  app.get('/v1/teams', { schema: { tags: ['teams'], summary: 'Configured teams and their agents' } }, async () => ({
    items: Object.values(d.teams).map((t) => ({
      id: t.id,
      description: t.description,
      lead: { id: t.lead.id, name: t.lead.name, model: t.lead.model, tools: t.lead.tools, delegatesTo: t.lead.delegatesTo ?? [], ...(t.lead.reviewAgent ? { reviewAgent: t.lead.reviewAgent } : {}) },
      agents: Object.values(t.agents).map((a) => ({ id: a.id, name: a.name, model: a.model, tools: a.tools })),
    })),
  }));
};
