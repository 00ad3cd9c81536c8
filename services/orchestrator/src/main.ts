import { loadTeamsOrExit, modelFromConfig, TeamCatalog } from '@baton/agents';
import { busNames, connectNats, drainNats, deploymentGuard, natsAnswers, reportRelayLag, serveDiagnostics, setUpTopology } from '@baton/bus';
import { claimNamespace, createDb, restoredLogProblem, schemaReady } from '@baton/db';
import { EventStore, servicesCachePolicy, TaskCache } from '@baton/event-store';
import { loadTeamConfig, saveTeamConfigs, workspaceManifest } from '@baton/storage';
import { configOrExit, createLogger, holdNamespace, installCrashGuards, installShutdown, markStarted, retryForever, startOps, startupCheck, startTelemetry, topologyFromEnv } from '@baton/runtime';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { loadOrchestratorConfig } from './config.ts';
import { startOrchestrator } from './worker.ts';

// Composition root: config → clients → worker → shutdown.
const config = configOrExit(() => loadOrchestratorConfig(process.env)); // invalid: every problem printed, exit 78
const log = createLogger('orchestrator', { level: config.LOG_LEVEL, pretty: config.LOG_PRETTY });
// A rejection that only reports a lost connection is logged, not fatal (see installCrashGuards).
installCrashGuards(log);
const tracing = startTelemetry('orchestrator', process.env, log);
// A bad team config stops start-up at once, naming every problem.
const teams = loadTeamsOrExit(config.BATON_TEAMS_DIR, log);
const db = createDb(config.DATABASE_URL, { max: config.PG_POOL_MAX, applicationName: 'baton-orchestrator', countQueries: true, log });
const cache = new TaskCache(db.pool, servicesCachePolicy);
// The ops port first: while this waits (for Postgres, the migrations, NATS, its streams) /healthz answers
// and /readyz says on what (`started: …`); it had no port at all until started.
const checks: Record<string, () => Promise<unknown>> = { started: startupCheck, postgres: schemaReady(db.pool) };
const ops = await startOps(config, { log, checks });
await retryForever(`connecting to Postgres`, log, () => db.pool.query('select 1'));
// One namespace per database: another's would take the relay's lock and publish this one's events where nobody listens.
const deployment = await holdNamespace('orchestrator', config.BATON_NAMESPACE, (ns) => claimNamespace(db.pool, ns), log, () => restoredLogProblem(db.pool));
const nc = await connectNats(config.NATS_URL, 'baton-orchestrator', log);
checks.nats = () => natsAnswers(nc);
const names = busNames(config.BATON_NAMESPACE);
// This database's streams: another deployment's (another database on this namespace) are refused while it runs.
const topology = { ...topologyFromEnv(config), ...deploymentGuard('orchestrator', nc, names, deployment) };
await setUpTopology(() => jetstreamManager(nc), names, topology, log);
const model = modelFromConfig(config);
const catalog = new TeamCatalog(teams, (v) => loadTeamConfig(db.pool, v));
await retryForever('recording team config versions', log, () => saveTeamConfigs(db.pool, catalog.versions()));
const orchestrator = await startOrchestrator({
  store: new EventStore(db.pool, { groupCommit: true }),
  load: cache.load,
  known: cache,
  ended: (taskId) => cache.ended(taskId),
  pool: db.pool,
  nc,
  js: jetstream(nc),
  names,
  log,
  model,
  teams,
  catalog,
  workspaceFiles: async (digest) => (await workspaceManifest(db.pool, digest)) ?? [],
  now: () => new Date(),
  concurrency: config.ORCHESTRATOR_CONCURRENCY,
  heartbeatMs: Math.min(5000, Math.floor(config.EVENTS_ACK_WAIT_MS / 3)),
  maxAttempts: config.CONSUMER_MAX_ATTEMPTS,
  deadlineBackstopMs: config.DEADLINE_BACKSTOP_MS,
  watchdog: { everyMs: config.WATCHDOG_INTERVAL_MS, graceMs: config.WATCHDOG_GRACE_MS, maxRedispatches: config.WATCHDOG_MAX_REDISPATCHES, maxStalledAttempts: config.WATCHDOG_MAX_STALLED_ATTEMPTS, replayWindowMs: config.BUS_REPLAY_WINDOW_MS },
  busCheckMs: config.BUS_CHECK_INTERVAL_MS,
  topology,
  relay: { enabled: config.RELAY_ENABLED, batchSize: config.RELAY_BATCH_SIZE, backstopMs: config.RELAY_BACKSTOP_MS },
});
markStarted();
log.info({ namespace: names.namespace || '(default)', model: model.name, relay: config.RELAY_ENABLED }, 'orchestrator started');
// The relay's lag, read when scraped: how far the log head is ahead of what was published.
reportRelayLag(db.pool);
serveDiagnostics(nc, names, 'orchestrator', () => ({ pgQueries: db.queriesIssued(), cachedTasks: cache.size, opsPort: ops.port }));
installShutdown(log, [
  { name: 'stop consuming and finish in-flight work', run: () => orchestrator.stop() },
  { name: 'drain NATS', run: () => drainNats(nc) },
  { name: 'close Postgres', run: () => db.close() },
  { name: 'export the last spans and close the ops port', run: async () => { await tracing.shutdown(); await ops.close(); } },
]);
