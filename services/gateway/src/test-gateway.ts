import { createGatewayMetrics } from '@baton/telemetry';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinTeams, TeamCatalog, type StreamingModel, type TeamDefinition } from '@baton/agents';
import { busNames } from '@baton/bus';
import type { MailRecipientRules, NotifyConfig } from '@baton/domain';
import type { Db } from '@baton/db';
import { TaskCache, type EventStore } from '@baton/event-store';
import { limiter, silentLogger, type Logger } from '@baton/runtime';
import { DEFAULT_WORKSPACE_LIMITS, loadTeamConfig, saveTeamConfigs, type WorkspaceLimits } from '@baton/storage';
import type { NatsConnection } from '@nats-io/nats-core';
import type { FastifyInstance } from 'fastify';
import { fixedApiKeys, type ApiKeys } from './api-keys.ts';
import { buildApp } from './app.ts';
import { bulkLimit, DEFAULT_LIMITS, type GatewayLimits, type TenantBudgets } from './deps.ts';
import { defaultTeamOf } from './routes/submit.ts';
import { SseHub } from './sse-hub.ts';
import { TaskTenants } from './task-tenants.ts';

/**
 * A gateway app for the gateway's tests (in process, `inject` or a real listen): the shipped
 * teams, a small body limit, the default rate and stream limits, no examples unless a directory
 * is given, and — with a NATS connection — an SSE hub attached to it.
 */
export async function testGateway(
  pg: { db: Pick<Db, 'pool' | 'kysely'>; store: EventStore },
  nats: { nc: NatsConnection; namespace: string } | null,
  opts: { teams?: Readonly<Record<string, TeamDefinition>>; defaultTeam?: string | null; apiKeys?: Map<string, string> | ApiKeys; openApiHosts?: string[]; namespace?: string; sseHeartbeatMs?: number; examplesDir?: string; workspaceLimits?: WorkspaceLimits; limits?: Partial<GatewayLimits>; allowPrivateWebhooks?: boolean; budgets?: TenantBudgets; chatModel?: StreamingModel; notify?: Record<string, NotifyConfig>; mailRecipients?: MailRecipientRules; mailLinkSecret?: string; log?: Logger; deployment?: string } = {},
): Promise<FastifyInstance> {
  const log = opts.log ?? silentLogger();
  const names = busNames(opts.namespace ?? nats?.namespace ?? '');
  const hub = new SseHub(names, log);
  if (nats) hub.attach(nats.nc);
  return buildApp({
    pool: pg.db.pool,
    kysely: pg.db.kysely,
    store: pg.store,
    load: new TaskCache(pg.db.pool).load,
    names,
    nats: () => nats?.nc ?? null,
    ...(opts.deployment ? { deployment: () => opts.deployment ?? null } : {}),
    hub,
    tenants: new TaskTenants(),
    teams: opts.teams ?? builtinTeams,
    defaultTeam: opts.defaultTeam !== undefined ? opts.defaultTeam : (defaultTeamOf(opts.teams ?? builtinTeams, undefined) as { team: string | null }).team,
    catalog: new TeamCatalog(opts.teams ?? builtinTeams, (v) => loadTeamConfig(pg.db.pool, v)),
    teamsRecorded: () => saveTeamConfigs(pg.db.pool, new TeamCatalog(opts.teams ?? builtinTeams).versions()),
    apiKeys: opts.apiKeys && 'current' in opts.apiKeys ? opts.apiKeys : fixedApiKeys(opts.apiKeys ?? new Map()),
    ...(opts.openApiHosts ? { openApiHosts: opts.openApiHosts } : {}),
    log,
    metrics: createGatewayMetrics(),
    now: () => new Date(),
    newId: randomUUID,
    sseHeartbeatMs: opts.sseHeartbeatMs ?? 15_000,
    bodyLimit: 64 * 1024,
    examplesDir: opts.examplesDir ?? path.join(tmpdir(), 'baton-no-examples'),
    workspaceLimits: opts.workspaceLimits ?? { ...DEFAULT_WORKSPACE_LIMITS, maxArchiveBytes: 64 * 1024 },
    limits: { ...DEFAULT_LIMITS, ...opts.limits },
    allowPrivateWebhooks: opts.allowPrivateWebhooks ?? false,
    bulk: limiter(bulkLimit(pg.db.pool.options.max ?? 10)),
    ...(opts.budgets ? { budgets: opts.budgets } : {}),
    ...(opts.chatModel ? { chatModel: opts.chatModel } : {}),
    ...(opts.notify ? { notify: opts.notify } : {}),
    ...(opts.mailRecipients ? { mailRecipients: opts.mailRecipients } : {}),
    ...(opts.mailLinkSecret ? { mailLinkSecret: opts.mailLinkSecret } : {}),
  });
}
