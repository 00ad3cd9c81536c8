import { createGatewayMetrics } from '@baton/telemetry';
import { randomUUID } from 'node:crypto';
import { chatModelFromConfig, loadTeamsOrExit, TeamCatalog } from '@baton/agents';
import { busNames, connectNats, drainNats, serveDeployment, serveDiagnostics } from '@baton/bus';
import { claimNamespace, createDb, restoredLogProblem } from '@baton/db';
import { EventStore, gatewayCachePolicy, TaskCache } from '@baton/event-store';
import { ConfigError, configOrExit, createLogger, exitOnConfigError, holdNamespace, installCrashGuards, installShutdown, limiter, listenOrExit, retryForever, startTelemetry } from '@baton/runtime';
import { listExamples, loadTeamConfig, saveTeamConfigs } from '@baton/storage';
import type { NatsConnection } from '@nats-io/transport-node';
import { ApiKeysFileError, apiKeysFile, fixedApiKeys } from './api-keys.ts';
import { buildApp } from './app.ts';
import { gatewayLimits, loadGatewayConfig, parseApiKeys, workspaceLimits } from './config.ts';
import { bulkLimit } from './deps.ts';
import { defaultTeamOf } from './routes/submit.ts';
import { SseHub } from './sse-hub.ts';
import { TaskTenants } from './task-tenants.ts';

// Composition root. The HTTP server starts even while Postgres or NATS are down: /readyz
// answers 503 and writes fail with 503 (nothing is half-accepted) until they are back.
const config = configOrExit(() => loadGatewayConfig(process.env)); // invalid: every problem printed, exit 78
const log = createLogger('gateway', { level: config.LOG_LEVEL, pretty: config.LOG_PRETTY });
// A rejection that only reports a lost connection is logged, not fatal (see installCrashGuards).
installCrashGuards(log);
const tracing = startTelemetry('gateway', process.env, log);
// A bad team config stops start-up at once, naming every problem.
const teams = loadTeamsOrExit(config.BATON_TEAMS_DIR, log);
const defaults = defaultTeamOf(teams, config.BATON_DEFAULT_TEAM);
if ('problem' in defaults) exitOnConfigError(new ConfigError('gateway', [defaults.problem]));
if (defaults.team === null) log.warn({ teams: Object.keys(teams) }, 'no default team (BATON_DEFAULT_TEAM, or a team named research, or a single team): every task and chat must name its team');
const db = createDb(config.DATABASE_URL, { max: config.PG_POOL_MAX, applicationName: 'baton-gateway', countQueries: true, log });
// Finished tasks too: people read them again and again (gatewayCachePolicy).
const cache = new TaskCache(db.pool, gatewayCachePolicy);
const names = busNames(config.BATON_NAMESPACE);
const hub = new SseHub(names, log);
let nc: NatsConnection | null = null;
// This database's deployment id (known once Postgres answers the namespace claim below).
let deployment: string | null = null;
const catalog = new TeamCatalog(teams, (v) => loadTeamConfig(db.pool, v));
const apiKeys = config.BATON_API_KEYS_FILE
  ? await apiKeysFile(config.BATON_API_KEYS_FILE, log, config.API_KEYS_RELOAD_MS).catch((err: unknown) => {
      if (err instanceof ApiKeysFileError) exitOnConfigError(new ConfigError('gateway', [err.message]));
      throw err;
    })
  : fixedApiKeys(parseApiKeys(config.BATON_API_KEYS));
if (!apiKeys.required) log.warn('no BATON_API_KEYS configured: the API is OPEN (single tenant "default"); set keys before exposing it');

const app = await buildApp({
  pool: db.pool,
  kysely: db.kysely,
  store: new EventStore(db.pool, { groupCommit: true }),
  load: cache.load,
  names,
  nats: () => nc,
  deployment: () => deployment,
  hub,
  tenants: new TaskTenants(),
  teams,
  defaultTeam: defaults.team,
  catalog,
  teamsRecorded: () => teamsRecorded(),
  apiKeys,
  openApiHosts: config.OPEN_API_HOSTS,
  log,
  metrics: createGatewayMetrics(),
  now: () => new Date(),
  newId: randomUUID,
  sseHeartbeatMs: config.SSE_HEARTBEAT_MS,
  bodyLimit: config.BODY_LIMIT_BYTES,
  examplesDir: config.BATON_EXAMPLES_DIR,
  workspaceLimits: workspaceLimits(config),
  limits: gatewayLimits(config),
  allowPrivateWebhooks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
  bulk: limiter(bulkLimit(config.PG_POOL_MAX)),
  budgets: config.TENANT_BUDGETS,
  notify: config.TENANT_NOTIFY,
  mailRecipients: config.MAIL_ALLOWED_RECIPIENTS,
  ...(config.MAIL_LINK_SECRET ? { mailLinkSecret: config.MAIL_LINK_SECRET } : {}),
  chatModel: chatModelFromConfig(config),
  chatMaxTokens: config.CHAT_MAX_TOKENS,
});
if (config.WEBHOOK_ALLOW_PRIVATE_NETWORKS) log.warn('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: webhook URLs may name loopback and private addresses (development only)');
// Examples are read per request (they may change); say at start which there are and which cannot be used.
void listExamples(config.BATON_EXAMPLES_DIR, workspaceLimits(config)).then(
  (examples) => {
    log.info({ dir: config.BATON_EXAMPLES_DIR, examples: examples.map((e) => e.name) }, 'examples');
    for (const e of examples) if (e.error) log.warn({ example: e.name, error: e.error }, 'example cannot be used');
  },
  (err: Error) => log.warn({ dir: config.BATON_EXAMPLES_DIR, err: err.message }, 'examples directory unreadable'),
);
await listenOrExit({ host: config.HOST, port: config.PORT, setting: 'PORT (baton up --port N)', hostSetting: 'HOST' }, () => app.listen({ port: config.PORT, host: config.HOST }));
const address = app.server.address();
log.info({ url: `http://${config.HOST}:${typeof address === 'object' && address ? address.port : config.PORT}` }, 'gateway listening');
db.pool.query('select 1').catch((err: Error) => log.error({ err: err.message }, 'Postgres is unreachable; /readyz reports 503 until it is back'));
// The configurations this gateway accepts tasks with are recorded (a task names its version), so an
// orchestrator or runner that has not loaded them yet — a rolling update adding a team — runs them.
let recording: Promise<void> | null = null;
const teamsRecorded = (): Promise<void> =>
  (recording ??= saveTeamConfigs(db.pool, catalog.versions()).catch((err: unknown) => {
    recording = null; // asked again by the next submit (or the retry below)
    throw err;
  }));
void retryForever('recording team config versions', log, teamsRecorded);
// One namespace per database (checked once Postgres answers: the gateway serves meanwhile).
const claimed = holdNamespace('gateway', config.BATON_NAMESPACE, (ns) => claimNamespace(db.pool, ns), log, () => restoredLogProblem(db.pool)).then((d) => (deployment = d));
const connected = connectNats(config.NATS_URL, 'baton-gateway', log);
// The gateway answers for its deployment too: with its workers restarting, another database's
// worker on this namespace must not take the streams of a deployment still serving people.
void Promise.all([claimed, connected]).then(([d, c]) => serveDeployment(c, names, d));
void connected.then((c) => {
  nc = c;
  hub.attach(c);
  serveDiagnostics(c, names, 'gateway', () => ({ pgQueries: db.queriesIssued(), cachedTasks: cache.size, sseHub: { mode: hub.mode, watchedTasks: hub.watchedTasks, taskLists: hub.listeningToAll } }));
});

installShutdown(log, [
  { name: 'close HTTP (ends SSE streams)', run: () => app.close() },
  { name: 'drain NATS', run: async () => { hub.close(); if (nc) await drainNats(nc); } },
  { name: 'close Postgres', run: () => db.close() },
  { name: 'export the last spans', run: () => tracing.shutdown() },
]);
