import { statSync } from 'node:fs';
import { tracingEnvShape } from '@baton/telemetry';
import { z } from 'zod';
import type { Logger } from 'pino';
import { retryForever } from './shutdown.ts';

export class ConfigError extends Error {
  readonly issues: string[];
  constructor(service: string, issues: string[]) {
    super(`${service}: invalid configuration:\n${issues.map((i) => `  - ${i}`).join('\n')}`);
    this.name = new.target.name;
    this.issues = issues;
  }
}

/**
 * Settings whose default is unsafe in production — an open API (BATON_API_KEYS, or its file), webhooks signed with the public
 * development secret, a database or NATS on localhost, unsigned mail links —, so an empty value
 * (a Kubernetes Secret key left blank, `FOO=` in a file) is refused instead of meaning "unset".
 * Leave them out to get the default.
 */
export const UNSAFE_WHEN_EMPTY: ReadonlySet<string> = new Set(['DATABASE_URL', 'NATS_URL', 'BATON_API_KEYS', 'BATON_API_KEYS_FILE', 'WEBHOOK_SECRET', 'MAIL_LINK_SECRET']);

/** Parse an environment with a zod schema; on failure every problem is listed, by variable name. */
export function loadConfig<S extends z.ZodType>(service: string, schema: S, env: Record<string, string | undefined>): z.infer<S> {
  // Any other variable set to nothing (`FOO=`, compose's `${FOO:-}`) is not set: its default applies.
  // Only the service's own settings: the gateway does not refuse the notifier's WEBHOOK_SECRET.
  const own = 'shape' in schema && typeof schema.shape === 'object' && schema.shape !== null ? new Set(Object.keys(schema.shape)) : null;
  const empty = Object.entries(env).filter(([k, v]) => v !== undefined && v.trim() === '' && UNSAFE_WHEN_EMPTY.has(k) && (own === null || own.has(k))).map(([k]) => `${k}: is set but empty; leave it out for its default, or give a value (an empty value is refused here: its default is not safe for production)`);
  const res = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  const issues = [...empty, ...(res.success ? [] : res.error.issues.filter((i) => !empty.some((e) => e.startsWith(`${String(i.path[0])}:`))).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`))];
  if (res.success && issues.length === 0) return res.data;
  throw new ConfigError(service, issues);
}

/**
 * A service's configuration, or — when it is invalid — every problem printed and exit 78
 * (EX_CONFIG, as for a bad team config): another start cannot fix it, so `baton up` does not
 * restart the service but stops, instead of restarting it for ever.
 */
export function configOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return exitOnConfigError(err);
  }
}

/** A configuration problem found after parsing (a directory that cannot be used…): printed, exit 78, as configOrExit. */
export function exitOnConfigError(err: ConfigError): never {
  console.error(err.message);
  process.exit(78);
}

/** Why a listen failed, for the errors another start cannot fix; null for any other error. */
function listenProblem(err: unknown): string | null {
  switch ((err as NodeJS.ErrnoException | null)?.code) {
    case 'EADDRINUSE':
      return 'the port is in use by another process (another Baton still running?)';
    case 'EACCES':
      return 'this user may not listen on that port';
    case 'EADDRNOTAVAIL':
      return 'the host is not an address of this machine';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name does not resolve';
    default:
      return null;
  }
}

/**
 * Listen, or — when the address cannot be had (in use, not permitted, not ours) — say which and
 * how to choose another (`setting`), on stderr, and exit 78 like a bad configuration: `baton up`
 * then stops, instead of restarting the service for ever behind a stack trace.
 */
export async function listenOrExit<T>(where: { host: string; port: number; setting: string; hostSetting: string }, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const problem = listenProblem(err);
    if (!problem) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    // The port is the problem (in use, not permitted), or the host (not ours, not a name): say which setting to change.
    const fix = code === 'EADDRINUSE' || code === 'EACCES' ? `Stop what holds it, or choose another with ${where.setting}.` : `Choose another with ${where.hostSetting}.`;
    console.error(`cannot listen on ${where.host}:${where.port}: ${problem}. ${fix}`);
    process.exit(78);
  }
}

const tenantJson = <T extends z.ZodType>(value: T) => (s: z.ZodString | z.ZodDefault<z.ZodString>) =>
  s
    .transform((text, ctx) => {
      try {
        return JSON.parse(text === '' ? '{}' : text) as unknown;
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `must be JSON: ${(err as Error).message}` });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.string().regex(/^(\*|[A-Za-z0-9_-]{1,64})$/, 'a tenant name or *'), value));

/** A JSON object by tenant name ("*": every tenant not named), each value parsed with `value`; unset: `{}`. */
export const byTenant = <T extends z.ZodType>(value: T) => tenantJson(value)(z.string().default('{}'));

/** As `byTenant`, but unset is `undefined` (a rule nobody set, not a rule that allows nothing). */
export const byTenantIfSet = <T extends z.ZodType>(value: T) => tenantJson(value)(z.string()).optional();

/** Pieces every service's config shares. */
export const commonEnv = {
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://postgres@127.0.0.1:5432/baton'),
  NATS_URL: z.string().regex(/^(nats|tls|ws|wss):\/\//, 'must be a nats:// URL').default('nats://127.0.0.1:4222'),
  BATON_NAMESPACE: z.string().regex(/^[a-z0-9]{0,20}$/, '0-20 lowercase letters or digits').default(''),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_PRETTY: z.stringbool().default(false),
  /**
   * Postgres connections per process. Few are faster: appends share statements (group commit)
   * and a statement is short, so a queue in the pool costs less than more backends contending
   * for Postgres's cores (docs/benchmarks.md: 6 against 10 and 20 on the 2-core VM).
   */
  PG_POOL_MAX: z.coerce.number().int().min(1).max(200).default(6),
  /** Team definitions (`<team>/team.json`, agent JSON + prompt files); default: the repository's config/teams. */
  BATON_TEAMS_DIR: z.string().min(1).optional(),
  /**
   * How long JetStream waits for an ack before redelivering (the takeover delay after a crash).
   * Part of the shared topology: every service must be given the same values.
   */
  EVENTS_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
  JOBS_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(60_000),
  /**
   * How long BATON_EVENTS keeps a message (Postgres keeps every event for ever; the stream only
   * carries them to their consumers): its disk is about this long's worth of transitions. Shorter
   * than the longest a consumer may be down loses nothing the watchdog cannot re-feed, but
   * webhooks of messages dropped unread are not sent. Part of the shared topology, like the ack waits.
   */
  BUS_EVENTS_MAX_AGE_MS: z.coerce.number().int().min(3_600_000).max(365 * 86_400_000).default(7 * 86_400_000),
  /** How often each service checks that its JetStream streams and consumers exist (re-creating what is missing). */
  BUS_CHECK_INTERVAL_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /** OpenTelemetry's standard variables (tracing is off unless an OTLP endpoint or exporter is set; docs/observability.md). */
  ...tracingEnvShape,
};

/**
 * The ops port of a service without an HTTP API of its own: /healthz, /readyz and /metrics
 * (0: a free port, logged at start). Each service has its own default, so they can share a host.
 */
export const opsEnv = (defaultPort: number) => ({
  OPS_PORT: z.coerce.number().int().min(0).max(65_535).default(defaultPort),
  /** Where the ops port listens (0.0.0.0 in containers, for the kubelet and Prometheus). */
  OPS_HOST: z.string().min(1).default('127.0.0.1'),
});

/** The JetStream settings every service agrees on (from EVENTS_/JOBS_ACK_WAIT_MS, BUS_EVENTS_MAX_AGE_MS). */
export const topologyFromEnv = (c: { EVENTS_ACK_WAIT_MS: number; JOBS_ACK_WAIT_MS: number; BUS_EVENTS_MAX_AGE_MS: number }) => ({
  ackWaitMs: { orchestrator: c.EVENTS_ACK_WAIT_MS, notifier: c.EVENTS_ACK_WAIT_MS, runner: c.JOBS_ACK_WAIT_MS },
  eventsMaxAgeMs: c.BUS_EVENTS_MAX_AGE_MS,
});

/** A directory that must exist when the service starts (its files are read: examples, a corpus). */
export const existingDirectory = () =>
  z
    .string()
    .min(1)
    .refine((d) => statSync(d, { throwIfNoEntry: false })?.isDirectory() === true, 'no such directory (it must exist when the service starts)');

/** The longest wait a Node timer holds (longer ones fire at once, with a TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration in milliseconds: whole, at least `min` (100 unless said: a period of 0 is a busy
 * loop, a timeout of 0 fails everything), at most what a timer holds (about 24.8 days).
 */
export const durationMs = (def: number, min = 100) =>
  z.coerce
    .number()
    .int('must be a whole number of milliseconds')
    .min(min, `must be at least ${min} ms`)
    .max(MAX_TIMER_MS, `must be at most ${MAX_TIMER_MS} ms (about 24.8 days: the longest a timer holds)`)
    .default(def);

/** Claude (unset key → the offline model). Shared by the services that call models. */
export const modelEnv = {
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  ANTHROPIC_MAX_RETRIES: z.coerce.number().int().min(0).max(20).default(4),
  ANTHROPIC_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(600_000),
  /**
   * How long an agent keeps asking while the model API cannot answer (429, 5xx, 529, a cut or
   * stalled connection: after the client's own retries), from its first failed call since its
   * last turn, before it fails `model_unavailable` — the same bound for the lead and subagents,
   * however many replicas ask.
   */
  ANTHROPIC_OUTAGE_LIMIT_MS: durationMs(900_000, 1000),
};

/** Why a service of `namespace` may not run on a database `owner` claimed first (null: it may). */
export function namespaceRefusal(namespace: string, owner: string): string | null {
  if (owner === namespace) return null;
  const name = (ns: string): string => (ns === '' ? "'' (none set)" : `'${ns}'`);
  return `BATON_NAMESPACE: ${name(namespace)}, but DATABASE_URL's database belongs to namespace ${name(owner)} (the first service that ran on it claimed it). Two namespaces on one database act on each other's tasks — a relay publishing one's events where only the other listens (tasks stalled, webhooks lost): give each deployment its own database, or set BATON_NAMESPACE=${owner === '' ? "'' (leave it out)" : owner}.`;
}

/**
 * Hold a service to its database's namespace: `claim` (@baton/db's claimNamespace) records this
 * one as the owner if none is, and answers the owner (asked again while Postgres is away); a
 * database another namespace owns is refused — printed, exit 78, like a bad setting. So is a log
 * restored from another server and not yet renumbered (`restoredLog`, @baton/db's
 * restoredLogProblem): what a service wrote on it before the migrations step renumbered it would
 * be lost to the relay. Resolves to the database's deployment id (what the service's streams are
 * marked with: `ensureTopology`).
 */
export async function holdNamespace(service: string, namespace: string, claim: (namespace: string) => Promise<{ namespace: string; deployment: string }>, log: Logger, restoredLog: () => Promise<string | null>): Promise<string> {
  const owner = await retryForever("claiming the database for this service's BATON_NAMESPACE", log, () => claim(namespace));
  const refused = namespaceRefusal(namespace, owner.namespace) ?? (await retryForever('checking the event log', log, restoredLog));
  if (refused) exitOnConfigError(new ConfigError(service, [refused]));
  return owner.deployment;
}
