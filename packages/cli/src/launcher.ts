import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createDb, ensureDatabase, migrateToLatest } from '@baton/db';

export const SERVICES = ['orchestrator', 'sandbox-runner', 'notifier', 'gateway'] as const;
export type ServiceName = (typeof SERVICES)[number];

const ROOT = path.resolve(import.meta.dirname, '../../..');
const COLORS: Record<ServiceName, string> = { gateway: '36', orchestrator: '35', 'sandbox-runner': '33', notifier: '32' };
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

export interface LaunchOptions {
  env: NodeJS.ProcessEnv;
  services?: readonly ServiceName[];
  /** Where log lines go (default: stdout, pretty). */
  write?: (line: string) => void;
  color?: boolean;
}

export interface Launched {
  children: Map<ServiceName, ChildProcess>;
  /** Resolves when every child has exited. */
  exited: Promise<void>;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/** Create the database if needed and apply migrations (retrying while Postgres starts). */
export async function prepareDatabase(url: string, log: (m: string) => void): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (let attempt = 1; ; attempt++) {
    try {
      if (await ensureDatabase(url)) log(`created database ${new URL(url).pathname.slice(1)}`);
      const db = createDb(url, { max: 1, applicationName: 'baton-migrate' });
      try {
        const applied = await migrateToLatest(db.kysely);
        log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: up to date');
      } finally {
        await db.close();
      }
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`Postgres at ${redact(url)} is not usable: ${(err as Error).message}`, { cause: err });
      log(`waiting for Postgres at ${redact(url)} (${(err as Error).message}); attempt ${attempt}`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
    }
  }
}

/** Start each service as its own process, with pino's JSON turned into readable prefixed lines. */
export function launch(o: LaunchOptions): Launched {
  const write = o.write ?? ((l: string) => process.stdout.write(`${l}\n`));
  const color = o.color ?? process.stdout.isTTY;
  const children = new Map<ServiceName, ChildProcess>();
  const exits: Promise<void>[] = [];
  for (const name of o.services ?? SERVICES) {
    const child = spawn(process.execPath, [path.join(ROOT, 'services', name, 'src', 'main.ts')], {
      cwd: ROOT,
      env: { ...o.env, LOG_PRETTY: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.set(name, child);
    const prefix = color ? `\x1b[${COLORS[name]}m${name.padEnd(14)}\x1b[0m` : name.padEnd(14);
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => write(`${prefix} ${formatLine(line)}`));
    }
    exits.push(new Promise((resolve) => child.once('exit', (code, signal) => {
      write(`${prefix} exited (${signal ?? `code ${code}`})`);
      resolve();
    })));
  }
  const exited = Promise.all(exits).then(() => undefined);
  return {
    children,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 25_000) {
      for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
      const timer = setTimeout(() => {
        for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

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
