import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { freePort } from './procs.ts';

const run = promisify(execFile);

/**
 * Servers a fault-injecting script may stop, crash and wipe: its own, on free ports in a temp
 * directory — never the shared ones the tests and other runs use.
 */
export interface PrivateNats {
  url: string;
  /** kill -9, then start again on the same port; `empty`: with its store deleted first. */
  restart(o: { empty: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export async function startPrivateNats(): Promise<PrivateNats> {
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-nats-'));
  const port = await freePort();
  const url = `nats://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
    child = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', path.join(dir, 'store')], { stdio: 'ignore' });
    await until(async () => {
      const nc = await connect({ servers: url, timeout: 1000, maxReconnectAttempts: 0 });
      await nc.close();
    }, `nats-server on ${url}`);
  };
  const kill = async (): Promise<void> => {
    const c = child as ChildProcess | null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url,
    async restart({ empty }) {
      await kill();
      if (empty) await rm(path.join(dir, 'store'), { recursive: true, force: true });
      await start();
    },
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  /** The URL of its `postgres` database. */
  url: string;
  /** Crash it (`pg_ctl stop -m immediate`: no shutdown checkpoint, like a kill) and start it again after `downMs`. */
  crashRestart(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** initdb + pg_ctl on a free port in a temp dir (as the `postgres` OS user when run as root). */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = await postgresBin();
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-pg-'));
  const data = path.join(dir, 'data');
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  const exec = async (cmd: string, args: string[]): Promise<void> => {
    if (asRoot) await run('runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]);
    else await run(path.join(bin, cmd), args);
  };
  await mkdir(data);
  if (asRoot) {
    await chmod(dir, 0o777);
    await run('chown', ['-R', 'postgres', data]);
  }
  await exec('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  const start = () => exec('pg_ctl', ['-D', data, '-l', path.join(data, 'log'), '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, '-w', 'start']);
  await start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await until(async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.end();
  }, `Postgres on port ${port}`);
  return {
    url,
    async crashRestart(downMs) {
      await exec('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    async stop() {
      await exec('pg_ctl', ['-D', data, '-m', 'fast', 'stop']).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function postgresBin(): Promise<string> {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? (await readdir(root)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(path.join(root, v, 'bin', 'initdb'))) return path.join(root, v, 'bin');
  throw new Error('initdb not found under /usr/lib/postgresql/*/bin: install the postgresql package to run Postgres faults');
}

async function until(probe: () => Promise<void>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await probe();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} did not come up within ${timeoutMs} ms: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
