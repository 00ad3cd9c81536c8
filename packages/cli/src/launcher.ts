import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createDb, describeMigrations, describeRebase, ensureDatabase, migrateToLatest, migrationFailedForGood, rebaseRestoredLog } from '@baton/db';
import { pollUntil } from './poll.ts';

export const SERVICES = ['orchestrator', 'sandbox-runner', 'notifier', 'gateway'] as const;
export type ServiceName = (typeof SERVICES)[number];

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** Where each worker's ops port sits from one `OPS_PORT=N` (the order of their defaults, 9464–9466). */
const OPS_PORT_OFFSET: Partial<Record<ServiceName, number>> = { orchestrator: 0, 'sandbox-runner': 1, notifier: 2 };

/**
 * A service's environment: the one given, but `OPS_PORT=N` (not 0) becomes N, N+1, N+2 for the
 * orchestrator, the runner and the notifier — one port for all three would have the second and
 * third refuse to start. 0 stays 0 (each takes a free port).
 */
export function serviceEnv(name: ServiceName, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const offset = OPS_PORT_OFFSET[name];
  const base = Number(env.OPS_PORT);
  if (offset === undefined || !env.OPS_PORT || !Number.isInteger(base) || base <= 0) return env;
  return { ...env, OPS_PORT: String(base + offset) };
}
const COLORS: Record<ServiceName, string> = { gateway: '36', orchestrator: '35', 'sandbox-runner': '33', notifier: '32' };
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

export interface LaunchOptions {
  env: NodeJS.ProcessEnv;
  services?: readonly ServiceName[];
  /** Where log lines go (default: stdout, pretty). */
  write?: (line: string) => void;
  color?: boolean;
  /**
   * Supervise: a service that exits while not being stopped is started again after a capped,
   * doubling delay (`true`: DEFAULT_RESTART_POLICY). Off by default: the chaos script and the
   * tests that kill a service on purpose want it to stay dead.
   */
  restart?: boolean | Partial<RestartPolicy>;
  /** Told of every exit of a service, with the restart delay (`null`: it will not be restarted). */
  onExit?: (e: ServiceExit) => void;
}

export interface ServiceExit {
  name: ServiceName;
  code: number | null;
  signal: NodeJS.Signals | null;
  uptimeMs: number;
  /** Delay before it is started again; null when it is not (not supervised, stopping, or a configuration error). */
  restartInMs: number | null;
}

export interface Launched {
  /** The current process of each service (a restarted service has a new one). */
  children: Map<ServiceName, ChildProcess>;
  /** How many times each service has been restarted after exiting on its own. */
  restarts: Map<ServiceName, number>;
  /** Resolves when every service has exited for good (stopped, or exited without a restart to come). */
  exited: Promise<void>;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

export interface RestartPolicy {
  /** Delay before the first restart of a streak. */
  initialMs: number;
  /** The delay doubles per restart in a row, up to this. */
  maxMs: number;
  /** A service that stayed up this long before exiting starts a new streak (the short delay again). */
  resetAfterMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = { initialMs: 500, maxMs: 30_000, resetAfterMs: 60_000 };

/**
 * The restart backoff, as a pure function: given how many restarts in a row came before
 * (`streak`) and how long the process stayed up, the delay before the next start and the new
 * streak. 0.5 s, 1 s, 2 s … capped at 30 s; a process that had stayed up for `resetAfterMs` is
 * restarted after the initial delay again.
 */
export function restartDelay(policy: RestartPolicy, streak: number, uptimeMs: number): { delayMs: number; streak: number } {
  const s = uptimeMs >= policy.resetAfterMs ? 0 : Math.max(0, streak);
  return { delayMs: Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(s, 30)), streak: s + 1 };
}

/** Exit codes that another start cannot fix: 78 (EX_CONFIG) is a bad configuration, which the service has named. */
const NO_RESTART_CODES = new Set([78]);

/** Create the database if needed and apply migrations (retrying while Postgres starts). */
export async function prepareDatabase(url: string, log: (m: string) => void): Promise<void> {
  await pollUntil(
    async () => {
      if (await ensureDatabase(url)) log(`created database ${new URL(url).pathname.slice(1)}`);
      const db = createDb(url, { max: 1, applicationName: 'baton-migrate' });
      try {
        const { applied, newer } = await migrateToLatest(db.kysely);
        log(describeMigrations(applied, newer));
        const rebased = await rebaseRestoredLog(db.pool);
        if (rebased) log(describeRebase(rebased));
      } finally {
        await db.close();
      }
      return true;
    },
    {
      timeoutMs: 60_000,
      intervalMs: (attempt) => Math.min(5000, 250 * 2 ** attempt),
      // A server that answers and refuses (a migration's error, migrations that do not fit) is said at once, not waited on as "Postgres starting".
      retryErrors: (err) => !migrationFailedForGood(err),
      onRetry: (err, attempt) => log(`waiting for Postgres at ${redact(url)} (${(err as Error).message}); attempt ${attempt}`),
      onTimeout: (err) => new Error(`Postgres at ${redact(url)} is not usable: ${(err as Error).message}`),
    },
  );
}

/**
 * Start each service as its own process, with pino's JSON turned into readable prefixed lines;
 * with `restart`, supervise them (see LaunchOptions.restart).
 */
/**
 * Every service process this CLI started and that has not exited. Should the CLI itself end
 * without stopping them (an uncaught error), they end with it: left running, they would hold
 * their ports and go on working a database nobody watches.
 */
const spawned = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of spawned) c.kill('SIGKILL');
});

export function launch(o: LaunchOptions): Launched {
  const write = o.write ?? ((l: string) => process.stdout.write(`${l}\n`));
  const color = o.color ?? process.stdout.isTTY;
  const policy = o.restart ? { ...DEFAULT_RESTART_POLICY, ...(typeof o.restart === 'object' ? o.restart : {}) } : null;
  const children = new Map<ServiceName, ChildProcess>();
  const restarts = new Map<ServiceName, number>();
  const pending = new Map<ServiceName, NodeJS.Timeout>();
  // Services with a process running or a restart pending.
  const live = new Set<ServiceName>();
  let stopping = false;
  let allExited: () => void = () => {};
  const exited = new Promise<void>((r) => (allExited = r));
  const settle = (): void => {
    if (live.size === 0) allExited();
  };

  const start = (name: ServiceName, streak: number): void => {
    const prefix = color ? `\x1b[${COLORS[name]}m${name.padEnd(14)}\x1b[0m` : name.padEnd(14);
    const say = (level: 'INFO' | 'WARN' | 'ERROR', m: string): void => write(`${prefix} ${new Date().toISOString().slice(11, 23)} ${level.padEnd(5)} ${m}`);
    const child = spawn(process.execPath, [path.join(ROOT, 'services', name, 'src', 'main.ts')], {
      cwd: ROOT,
      env: { ...serviceEnv(name, o.env), LOG_PRETTY: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const startedAt = Date.now();
    children.set(name, child);
    spawned.add(child);
    live.add(name);
    if (policy) say('INFO', `[supervisor] started (pid ${child.pid})`);
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => write(`${prefix} ${formatLine(line)}`));
    }
    child.once('error', (err) => say('ERROR', `[supervisor] could not start: ${err.message}`));
    child.once('exit', (code, signal) => {
      spawned.delete(child);
      const uptimeMs = Date.now() - startedAt;
      const how = signal ?? `code ${code}`;
      let restartInMs: number | null = null;
      let next = streak;
      if (policy && !stopping && !(code !== null && NO_RESTART_CODES.has(code))) ({ delayMs: restartInMs, streak: next } = restartDelay(policy, streak, uptimeMs));
      if (!policy || stopping) write(`${prefix} exited (${how})`);
      else if (restartInMs === null) say('ERROR', `[supervisor] exited (${how}) after ${seconds(uptimeMs)}: a configuration error, not restarted`);
      else say('WARN', `[supervisor] exited unexpectedly (${how}) after ${seconds(uptimeMs)}; restarting in ${seconds(restartInMs)} (restart ${(restarts.get(name) ?? 0) + 1}, at ${new Date(Date.now() + restartInMs).toISOString()})`);
      o.onExit?.({ name, code, signal, uptimeMs, restartInMs });
      if (restartInMs === null) {
        live.delete(name);
        settle();
        return;
      }
      pending.set(name, setTimeout(() => {
        pending.delete(name);
        restarts.set(name, (restarts.get(name) ?? 0) + 1);
        start(name, next);
      }, restartInMs));
    });
  };
  for (const name of o.services ?? SERVICES) start(name, 0);

  const running = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;
  return {
    children,
    restarts,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 25_000) {
      stopping = true;
      for (const [name, t] of pending) {
        clearTimeout(t);
        live.delete(name);
      }
      pending.clear();
      for (const c of children.values()) if (running(c)) c.kill(signal);
      const timer = setTimeout(() => {
        for (const c of children.values()) if (running(c)) c.kill('SIGKILL');
      }, graceMs);
      settle();
      await exited;
      clearTimeout(timer);
    },
  };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** One pino JSON line → `HH:MM:SS.mmm LEVEL message {fields}`; anything else passes through. */
export function formatLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const { level, time, msg, pid: _p, hostname: _h, service: _s, name: _n, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const t = typeof time === 'number' ? new Date(time).toISOString().slice(11, 23) : '';
    const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : '';
    return `${t} ${(LEVELS[level as number] ?? String(level)).padEnd(5)} ${String(msg ?? '')}${extra}`;
  } catch {
    return line;
  }
}

export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]+@/, '//$1:***@');
}
