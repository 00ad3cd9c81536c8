import { toTeamInfoView } from '@baton/agents';
import { deadLetterCounts, inspectTopology, natsAnswers, relayStatus, reportConsumerBacklogs, reportRelayLag, topologyProblems } from '@baton/bus';
import { schemaReady, SchemaNotReadyError } from '@baton/db';
import { REQUEST_KINDS, TASK_STATUSES } from '@baton/domain';
import { taskFigures } from '@baton/event-store';
import { jetstreamManager } from '@nats-io/jetstream';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';

export const systemRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const schema = schemaReady(d.pool);
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    const checks: Record<string, string> = {};
    try {
      await schema();
      checks.postgres = 'ok';
    } catch (err) {
      checks.postgres = err instanceof SchemaNotReadyError ? err.message : `unreachable: ${(err as Error).message}`;
    }
    const nc = d.nats();
    // Asked of the server (a ping): a reconnecting connection is not closed, and looked fine.
    checks.nats = nc === null || nc.isDraining() ? 'unreachable' : await natsAnswers(nc).then(() => 'ok', (err: unknown) => `unreachable: ${(err as Error).message}`);
    const ok = Object.values(checks).every((v) => v === 'ok');
    // Reported, not failed on — this gateway still takes work without them, recorded in Postgres
    // to wait (a 503 here took the API, the console and every approval off a load balancer while
    // the workers were down): the bus's streams and consumers (the workers re-create them within
    // seconds of starting), and the relay (in the orchestrators).
    const info: Record<string, string> = {};
    if (nc && checks.nats === 'ok') {
      try {
        const report = await inspectTopology(await jetstreamManager(nc), d.names, d.deployment?.() ?? undefined);
        const problems = topologyProblems(report);
        info.bus =
          problems.length === 0
            ? 'ok'
            : Object.keys(report.foreign).length > 0
              ? `${problems.join('; ')}: another database is on this BATON_NAMESPACE (the workers refuse to start while its services run, and take the streams over once none does)`
              : `${problems.join('; ')} (the workers re-create them: is one running?)`;
      } catch (err) {
        info.bus = `cannot inspect: ${(err as Error).message}`;
      }
    }
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

  // Tasks by status, parked tasks, open requests and stuck tasks: read from the tasks read model
  // when scraped (one statement), so the gauges need no timer. Postgres away: they keep their last values.
  d.metrics.onScrape(async () => {
    const f = await taskFigures(d.kysely, d.limits.stuckAfterMs).catch(() => null);
    if (!f) return;
    for (const status of TASK_STATUSES) d.metrics.tasks.set({ status }, f.byStatus[status] ?? 0);
    d.metrics.parkedTasks.set(f.byStatus.awaiting_input ?? 0);
    for (const kind of REQUEST_KINDS) {
      d.metrics.openRequests.set({ kind }, f.openRequests[kind]?.count ?? 0);
      d.metrics.openRequestOldestSeconds.set({ kind }, f.openRequests[kind]?.oldestS ?? 0);
    }
    d.metrics.stuckTasks.set(f.stuck);
  });
  // The relay's lag, from Postgres: shown here too, so it grows on the dashboard while no orchestrator runs (nothing else would report it then).
  reportRelayLag(d.pool, d.metrics.onScrape);
  // Every consumer's backlog from the NATS server: the runners' queue shows growing while no runner runs.
  reportConsumerBacklogs(d.nats, d.names, d.metrics.onScrape);
  // Dead letters, from Postgres (every process records its own; a counter in each would reset with it).
  d.metrics.onScrape(async () => {
    const counts = await deadLetterCounts(d.pool).catch(() => null);
    if (!counts) return;
    // Every consumer is shown, at 0 until its first dead letter (a dashboard shows 0, not "No data", on a healthy deployment).
    for (const consumer of Object.values(d.names.consumers)) if (!counts.some((c) => c.consumer === consumer)) d.metrics.deadLetters.set({ consumer }, 0);
    for (const c of counts) {
      d.metrics.deadLetters.set({ consumer: c.consumer }, c.count);
      d.metrics.deadLetterLastSeconds.set({ consumer: c.consumer }, c.lastRecordedAt.getTime() / 1000);
    }
  });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => reply.type(d.metrics.registry.contentType).send(await d.metrics.render()));

  app.get('/v1/teams', { schema: { tags: ['teams'], summary: 'Configured teams and their agents' } }, async () => ({
    items: Object.values(d.teams).map(toTeamInfoView),
    // A task or chat that names no team gets this one (null: a team must be named).
    default: d.defaultTeam,
  }));
};
