import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as tcpConnect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A nats-server (with JetStream) of a test's own, on a free loopback port with its store in a
 * temporary directory: for tests that stop or restart NATS — never the shared server.
 * `stop()` ends it (SIGKILL: as abrupt as a crash; the store stays), `start()` brings it back on
 * the same port, optionally with extra arguments (e.g. `--user`/`--pass`), `destroy()` removes it.
 */
export interface PrivateNats {
  url: string;
  port: number;
  /** Its JetStream store (delete it while stopped to restart with an empty store). */
  dir: string;
  running(): boolean;
  /** Exits nobody asked for (not by stop()): when, the code or signal, and the end of its stderr. */
  readonly unexpectedExits: { at: Date; code: number | null; signal: string | null; stderr: string }[];
  start(extraArgs?: string[]): Promise<void>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

export async function privateNats(opts: { bin?: string } = {}): Promise<PrivateNats> {
  const bin = opts.bin ?? process.env.NATS_SERVER_BIN ?? 'nats-server';
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-nats-'));
  const port = await freePort();
  let child: ChildProcess | null = null;
  let stopping: ChildProcess | null = null;
  const unexpectedExits: PrivateNats['unexpectedExits'] = [];
  const start = async (extraArgs: string[] = []): Promise<void> => {
    if (child) return;
    const c = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir, ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    c.stderr?.on('data', (d) => (stderr = (stderr + String(d)).slice(-4000)));
    const failed = new Promise<never>((_, reject) => {
      c.once('error', (err) => reject(new Error(`privateNats: cannot run ${bin}: ${err.message}`)));
      c.once('exit', (code) => reject(new Error(`privateNats: nats-server exited (${code}) at start:\n${stderr}`)));
    });
    failed.catch(() => {});
    child = c;
    live.add(c);
    c.once('exit', (code, signal) => {
      live.delete(c);
      if (child === c) child = null;
      if (stopping !== c) unexpectedExits.push({ at: new Date(), code, signal, stderr });
    });
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.once('exit', () => {
        for (const p of live) p.kill('SIGKILL');
      });
    }
    const deadline = Date.now() + 20_000;
    while (!(await accepts(port))) {
      await Promise.race([failed, new Promise((r) => setTimeout(r, 50))]);
      if (Date.now() > deadline) throw new Error(`privateNats: nats-server did not listen on ${port} within 20 s:\n${stderr}`);
    }
  };
  const stop = async (): Promise<void> => {
    const c = child;
    if (!c) return;
    const exited = new Promise((r) => c.once('exit', r));
    stopping = c;
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    dir,
    running: () => child !== null,
    unexpectedExits,
    start,
    stop,
    async destroy() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
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
