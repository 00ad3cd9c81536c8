import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { appendFile, chown, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A Postgres server of a test's own: a fresh cluster (initdb) in a temporary directory on a free
 * loopback port, for tests that stop, crash or restart Postgres — never the shared server. Run as
 * the `postgres` OS user when we are root (Postgres refuses root). `stop()`/`crash()` keep the
 * data, `start()` brings the same cluster back on the same port, `destroy()` removes it all.
 */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
  port: number;
  dir: string;
  /** The server's own log (for a failure message). */
  logFile: string;
  running(): boolean;
  /** Start the cluster again (waits until it accepts connections). */
  start(): Promise<void>;
  /** `pg_ctl stop -m fast`: sessions are terminated (FATAL 57P01) and the server shuts down cleanly. */
  stop(): Promise<void>;
  /** `pg_ctl stop -m immediate`: every server process quits at once, as in a crash (recovery on the next start). */
  crash(): Promise<void>;
  /** Stop (immediately) if running and delete the directory. */
  destroy(): Promise<void>;
}

export interface PrivatePostgresOptions {
  port?: number;
  /** More `postgresql.conf` lines. */
  settings?: Record<string, string | number>;
}

/** Where initdb/pg_ctl live: $PG_BIN, `pg_config --bindir`, the newest /usr/lib/postgresql/N/bin, or PATH. */
export function postgresBinDir(): string | null {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(path.join(debian, v, 'bin', 'initdb'))) return path.join(debian, v, 'bin');
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (existsSync(path.join(dir, 'initdb'))) return dir;
  } catch {
    /* not installed */
  }
  for (const p of (process.env.PATH ?? '').split(path.delimiter)) if (p && existsSync(path.join(p, 'initdb')) && existsSync(path.join(p, 'pg_ctl'))) return p;
  return null;
}

const running = new Set<{ bin: string; dir: string; asUser: string[] }>();
let exitHookInstalled = false;

export async function privatePostgres(opts: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('privatePostgres: initdb/pg_ctl not found (install PostgreSQL, or set PG_BIN to its bin directory)');
  const root = process.getuid?.() === 0;
  // Postgres will not run as root: run its tools as the postgres user, who must own the directory.
  const asUser = root ? ['runuser', '-u', 'postgres', '--'] : [];
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-pg-'));
  if (root) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    await chown(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  const port = opts.port ?? (await freePort());
  const tool = async (name: string, args: string[]): Promise<void> => {
    const [cmd, ...rest] = asCommand(asUser, path.join(bin, name), args);
    try {
      await run(cmd, rest, { timeout: 120_000 });
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`privatePostgres: ${name} ${args.join(' ')} failed: ${e.stderr || e.stdout || e.message}`, { cause: err });
    }
  };
  await tool('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const settings: Record<string, string | number> = {
    port,
    listen_addresses: `'127.0.0.1'`,
    unix_socket_directories: `'${dir}'`,
    max_connections: 200,
    // A test server: no fsync (what is written reaches the OS, which is not the thing crashing:
    // a crash() kills Postgres, not the machine). synchronous_commit stays on — with it off, a
    // crash() would lose commits already acknowledged, which no client can be expected to survive.
    fsync: 'off',
    full_page_writes: 'off',
    ...opts.settings,
  };
  await appendFile(path.join(data, 'postgresql.conf'), `\n${Object.entries(settings).map(([k, v]) => `${k} = ${v}`).join('\n')}\n`);
  const entry = { bin, dir: data, asUser };
  let up = false;
  const pgCtl = (args: string[]) => tool('pg_ctl', ['-D', data, ...args]);
  const start = async (): Promise<void> => {
    if (up) return;
    await pgCtl(['-l', logFile, '-w', '-t', '60', 'start']);
    up = true;
    running.add(entry);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      // A test run that ends without destroy() (killed, crashed) must not leave servers behind.
      process.once('exit', () => {
        for (const r of running) {
          const [cmd, ...rest] = asCommand(r.asUser, path.join(r.bin, 'pg_ctl'), ['-D', r.dir, '-m', 'immediate', 'stop']);
          spawnSync(cmd, rest, { stdio: 'ignore', timeout: 10_000 });
        }
      });
    }
  };
  const halt = async (mode: 'fast' | 'immediate'): Promise<void> => {
    if (!up) return;
    await pgCtl(['-m', mode, '-w', '-t', '60', 'stop']);
    up = false;
    running.delete(entry);
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    logFile,
    running: () => up,
    start,
    stop: () => halt('fast'),
    crash: () => halt('immediate'),
    async destroy() {
      await halt('immediate').catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `runuser -u postgres -- tool args…` as root, else `tool args…`. */
function asCommand(asUser: string[], tool: string, args: string[]): [string, ...string[]] {
  return asUser.length > 0 ? [asUser[0] as string, ...asUser.slice(1), tool, ...args] : [tool, ...args];
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
