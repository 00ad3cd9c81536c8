import { busNames, connectNats, drainNats, deploymentGuard, natsAnswers, serveDiagnostics, setUpTopology } from '@baton/bus';
import { claimNamespace, createDb, restoredLogProblem, schemaReady } from '@baton/db';
import { EventStore } from '@baton/event-store';
import { configOrExit, createLogger, holdNamespace, installCrashGuards, installShutdown, markStarted, retryForever, startOps, startupCheck, startTelemetry, topologyFromEnv } from '@baton/runtime';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { backoffOf, DEV_WEBHOOK_SECRET, loadNotifierConfig } from './config.ts';
import { smtpMailer } from './mailer.ts';
import { startNotifier } from './worker.ts';

const config = configOrExit(() => loadNotifierConfig(process.env)); // invalid: every problem printed, exit 78
const log = createLogger('notifier', { level: config.LOG_LEVEL, pretty: config.LOG_PRETTY });
// A rejection that only reports a lost connection is logged, not fatal (see installCrashGuards).
installCrashGuards(log);
const tracing = startTelemetry('notifier', process.env, log);
const db = createDb(config.DATABASE_URL, { max: config.PG_POOL_MAX, applicationName: 'baton-notifier', countQueries: true, log });
// The ops port first: while this waits (for Postgres, the migrations, NATS, its streams) /healthz answers
// and /readyz says on what (`started: …`); it had no port at all until started.
const checks: Record<string, () => Promise<unknown>> = { started: startupCheck, postgres: schemaReady(db.pool) };
const ops = await startOps(config, { log, checks });
await retryForever('connecting to Postgres', log, () => db.pool.query('select 1'));
const deployment = await holdNamespace('notifier', config.BATON_NAMESPACE, (ns) => claimNamespace(db.pool, ns), log, () => restoredLogProblem(db.pool));
const nc = await connectNats(config.NATS_URL, 'baton-notifier', log);
checks.nats = () => natsAnswers(nc);
const names = busNames(config.BATON_NAMESPACE);
// This database's streams: another deployment's (another database on this namespace) are refused while it runs.
const topology = { ...topologyFromEnv(config), ...deploymentGuard('notifier', nc, names, deployment) };
await setUpTopology(() => jetstreamManager(nc), names, topology, log);
if (!config.WEBHOOK_SECRET) log.warn('WEBHOOK_SECRET is not set: webhooks are signed with a public development secret');
// Mail (docs/email.md): off without SMTP_URL (agents' outbox mails are then recorded as failed: mail_off).
const mailer = config.SMTP_URL ? smtpMailer(config.SMTP_URL, config.MAIL_TIMEOUT_MS) : null;
if (config.SMTP_URL) log.info({ smtp: new URL(config.SMTP_URL).host, from: config.MAIL_FROM, publicUrl: config.PUBLIC_URL }, 'mail on');
else log.info('mail is off (no SMTP_URL): no notification mails; outbox mails are recorded as failed (mail_off)');
const notifier = await startNotifier({
  store: new EventStore(db.pool),
  pool: db.pool,
  js: jetstream(nc),
  names,
  log,
  secret: config.WEBHOOK_SECRET ?? DEV_WEBHOOK_SECRET,
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
  backoffMs: backoffOf(config),
  concurrency: config.NOTIFIER_CONCURRENCY,
  heartbeatMs: Math.min(5000, Math.floor(config.EVENTS_ACK_WAIT_MS / 3)),
  now: () => new Date(),
  allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
  nc,
  busCheckMs: config.BUS_CHECK_INTERVAL_MS,
  topology,
  mail: {
    mailer,
    from: config.MAIL_FROM,
    publicUrl: config.PUBLIC_URL,
    // Required with SMTP_URL (the config refuses to start without it); unused while mail is off.
    linkSecret: config.MAIL_LINK_SECRET ?? '',
    linkTtlMs: config.MAIL_LINK_TTL_MS,
    attachMaxBytes: config.MAIL_ATTACH_MAX_BYTES,
    leaseMs: 3 * config.MAIL_TIMEOUT_MS,
    holder: `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    recipients: config.MAIL_ALLOWED_RECIPIENTS,
  },
});
if (config.WEBHOOK_ALLOW_PRIVATE_NETWORKS) log.warn('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: webhooks may reach loopback and private addresses (development only)');
markStarted();
log.info('notifier started');
serveDiagnostics(nc, names, 'notifier', () => ({ pgQueries: db.queriesIssued(), opsPort: ops.port }));
installShutdown(log, [
  { name: 'stop deliveries and finish in-flight ones', run: async () => { await notifier.stop(); mailer?.close(); } },
  { name: 'drain NATS', run: () => drainNats(nc) },
  { name: 'close Postgres', run: () => db.close() },
  { name: 'export the last spans and close the ops port', run: async () => { await tracing.shutdown(); await ops.close(); } },
]);
