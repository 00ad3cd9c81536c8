import { appendFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { loadTeamsOrExit, modelFromConfig, TeamCatalog } from '@baton/agents';
import { busNames, connectNats, drainNats, deploymentGuard, natsAnswers, serveDiagnostics, setUpTopology } from '@baton/bus';
import { claimNamespace, createDb, restoredLogProblem, schemaReady } from '@baton/db';
import { EventStore, servicesCachePolicy, TaskCache } from '@baton/event-store';
import { LocalSandboxProvider } from '@baton/sandbox';
import { loadTeamConfig, saveTeamConfigs, readWorkspace } from '@baton/storage';
import { ConfigError, configOrExit, createLogger, exitOnConfigError, holdNamespace, installCrashGuards, installShutdown, markStarted, retryForever, startOps, startupCheck, startTelemetry, topologyFromEnv } from '@baton/runtime';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { loadRunnerConfig } from './config.ts';
import { defaultRunnerId, handBackPredecessors } from './predecessors.ts';
import { startRunner } from './worker.ts';
import { artifactStore, prepareSearch, sandboxProviderFromConfig, startSweeper } from './wiring.ts';

const config = configOrExit(() => loadRunnerConfig(process.env)); // invalid: every problem printed, exit 78
const log = createLogger('sandbox-runner', { level: config.LOG_LEVEL, pretty: config.LOG_PRETTY });
// A rejection that only reports a lost connection is logged, not fatal (see installCrashGuards).
installCrashGuards(log);
const tracing = startTelemetry('sandbox-runner', process.env, log);
// A bad team config stops start-up at once, naming every problem.
const teams = loadTeamsOrExit(config.BATON_TEAMS_DIR, log);
const db = createDb(config.DATABASE_URL, { max: config.PG_POOL_MAX, applicationName: 'baton-runner', countQueries: true, log });
const cache = new TaskCache(db.pool, servicesCachePolicy);
const sandboxes = sandboxProviderFromConfig(config, db.pool, log);
// A root it cannot make workspaces under would fail every agent (and report ready): say so and stop.
const rootProblem = sandboxes instanceof LocalSandboxProvider ? await sandboxes.rootProblem() : null;
if (rootProblem) exitOnConfigError(new ConfigError('sandbox-runner', [`WORKSPACE_ROOT: ${rootProblem}`]));
// The ops port first: while this waits (for Postgres, the migrations, NATS, its streams) /healthz answers
// and /readyz says on what (`started: …`); it had no port at all until started.
const checks: Record<string, () => Promise<unknown>> = { started: startupCheck, postgres: schemaReady(db.pool) };
const ops = await startOps(config, { log, checks });
await retryForever('connecting to Postgres', log, () => db.pool.query('select 1'));
const deployment = await holdNamespace('sandbox-runner', config.BATON_NAMESPACE, (ns) => claimNamespace(db.pool, ns), log, () => restoredLogProblem(db.pool));
const nc = await connectNats(config.NATS_URL, 'baton-sandbox-runner', log);
checks.nats = () => natsAnswers(nc);
const names = busNames(config.BATON_NAMESPACE);
// This database's streams: another deployment's (another database on this namespace) are refused while it runs.
const topology = { ...topologyFromEnv(config), ...deploymentGuard('sandbox-runner', nc, names, deployment) };
await setUpTopology(() => jetstreamManager(nc), names, topology, log);
const runnerId = config.RUNNER_ID ?? defaultRunnerId(hostname(), process.pid);
// The agents an earlier process of this runner died with go back to the watchdog now, not after their leases run out.
await handBackPredecessors(db.pool, { runnerId, explicit: config.RUNNER_ID !== undefined, host: hostname() }, log).catch((err: unknown) =>
  log.warn({ err }, 'could not hand back the agents of an earlier runner process (their leases run out by themselves)'),
);
const catalog = new TeamCatalog(teams, (v) => loadTeamConfig(db.pool, v));
await retryForever('recording team config versions', log, () => saveTeamConfigs(db.pool, catalog.versions()));
const search = await retryForever('indexing the web_search corpus', log, () => prepareSearch(db.pool, config.BATON_CORPUS, config.BATON_CORPUS_DIR, log));
const stopSweeper = startSweeper(sandboxes, db.pool, config.SANDBOX_SWEEP_INTERVAL_MS, log);
const runner = await startRunner({
  store: new EventStore(db.pool, { groupCommit: true }),
  load: cache.load,
  ended: (taskId) => cache.ended(taskId),
  pool: db.pool,
  js: jetstream(nc),
  nc,
  names,
  log,
  model: modelFromConfig(config),
  teams,
  catalog,
  sandboxes,
  artifacts: artifactStore(db.pool),
  inputWorkspace: async (digest) => {
    const files = await readWorkspace(db.pool, digest);
    if (!files) throw new Error(`input workspace ${digest} is not stored`);
    return files;
  },
  search,
  hostEnv: process.env,
  mailRecipients: config.MAIL_ALLOWED_RECIPIENTS,
  runnerId,
  now: () => new Date(),
  ...(config.BATON_TOOL_AUDIT_FILE ? { audit: auditTo(config.BATON_TOOL_AUDIT_FILE) } : {}),
  concurrency: config.RUNNER_CONCURRENCY,
  heartbeatMs: Math.min(5000, Math.floor(config.JOBS_ACK_WAIT_MS / 3)),
  maxJobMs: config.JOB_MAX_MS,
  sandboxOutageLimitMs: config.SANDBOX_OUTAGE_LIMIT_MS,
  maxAttempts: config.CONSUMER_MAX_ATTEMPTS,
  lease: { db: db.pool, ttlMs: config.LEASE_TTL_MS },
  busCheckMs: config.BUS_CHECK_INTERVAL_MS,
  topology,
});
markStarted();
log.info({ runnerId, sandboxes: sandboxes.name }, 'sandbox-runner started');
serveDiagnostics(nc, names, 'sandbox-runner', () => ({ pgQueries: db.queriesIssued(), cachedTasks: cache.size, opsPort: ops.port }));
installShutdown(log, [
  { name: 'stop taking jobs and finish in-flight ones', run: () => runner.stop() },
  { name: 'stop the sandbox sweeper', run: async () => stopSweeper() },
  { name: 'drain NATS', run: () => drainNats(nc) },
  { name: 'close Postgres', run: () => db.close() },
  { name: 'export the last spans and close the ops port', run: async () => { await tracing.shutdown(); await ops.close(); } },
]);

/** Synchronous on purpose: the line must be on disk before the tool runs, even if we are killed right after. */
function auditTo(file: string) {
  return (entry: object): void => appendFileSync(file, `${JSON.stringify({ ...entry, runnerId, at: new Date().toISOString() })}\n`);
}
