import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TaskView } from '@baton/api';
import { deleteNamespace, newNamespace, waitFor, withDatabase } from '@baton/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BatonClient } from '@baton/client';
import { dropDatabase, freePort, waitReady } from './procs.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');

describe('baton up supervises the services', () => {
  const dbUrl = withDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_sup${randomBytes(3).toString('hex')}`);
  const namespace = newNamespace();
  let workspaces = '';
  afterAll(async () => {
    await deleteNamespace(inject('natsUrl'), namespace);
    if (workspaces) await rm(workspaces, { recursive: true, force: true });
    await dropDatabase(dbUrl);
  });

  it('a service killed with SIGKILL is restarted (logged with its signal) and works again; Ctrl-C still stops everything', async () => {
    workspaces = await mkdtemp(path.join(tmpdir(), 'baton-sup-'));
    const port = await freePort();
    const { ANTHROPIC_API_KEY: _key, ...env } = process.env; // the offline model
    const output: string[] = [];
    const child = spawn(process.execPath, ['packages/cli/src/main.ts', 'up', '--port', String(port)], {
      cwd: ROOT,
      env: { ...env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, WORKSPACE_ROOT: workspaces, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => output.push(String(d)));
    child.stderr.on('data', (d) => output.push(String(d)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const text = (): string => output.join('');
    /** The pids the supervisor reported for a service, in order. */
    const pids = (service: string): number[] => [...text().matchAll(new RegExp(`^${service}\\s+\\S+ INFO\\s+\\[supervisor\\] started \\(pid (\\d+)\\)`, 'gm'))].map((m) => Number(m[1]));
    const api = new BatonClient(`http://127.0.0.1:${port}`);
    try {
      await waitReady(api);
      await waitFor(() => ['gateway', 'orchestrator', 'sandbox-runner', 'notifier'].every((s) => pids(s).length === 1), { what: 'every service started once' });

      for (const service of ['gateway', 'orchestrator']) {
        const [before] = pids(service) as [number];
        process.kill(before, 'SIGKILL');
        await waitFor(() => pids(service).length === 2, { timeoutMs: 30_000, what: `${service} to be restarted; output:\n${text().slice(-3000)}` });
        expect(text()).toMatch(new RegExp(`${service}\\s+\\S+ WARN\\s+\\[supervisor\\] exited unexpectedly \\(SIGKILL\\) after [\\d.]+ s; restarting in 0\\.5 s \\(restart 1, at \\S+\\)`));
        expect(pids(service)[1]).not.toBe(before);
        expect(alive(before)).toBe(false);
        await waitReady(api); // the gateway answers again (at once, when the orchestrator was the one)
      }

      // The restarted orchestrator and gateway run a task through.
      const t = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Research the history of supervision trees', requirePlanApproval: false });
      await waitFor(async () => (await api.request<TaskView>('GET', `/v1/tasks/${t.id}`)).status === 'completed', { timeoutMs: 60_000, what: 'the task to complete after the restarts' });
      expect(text()).not.toMatch(/stopping the others/);
    } finally {
      child.kill('SIGINT');
      const code = await exited;
      expect(code, text().slice(-3000)).toBe(0);
    }
    expect(text()).toMatch(/all services stopped/);
    for (const service of ['gateway', 'orchestrator', 'sandbox-runner', 'notifier']) for (const pid of pids(service)) expect(alive(pid), `${service} pid ${pid}`).toBe(false);
  }, 150_000);

  it('a CLI that dies of an uncaught error takes the services it started with it (none is left running, orphaned)', async () => {
    // The launcher as the chaos script and `baton up` use it, in a process that then throws.
    const script = `
      import { launch } from './packages/cli/src/launcher.ts';
      const l = launch({ env: { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nothing_here', OPS_PORT: '0' }, services: ['notifier'], write: () => {} });
      const child = l.children.get('notifier');
      child.once('spawn', () => {
        console.log('pid ' + child.pid);
        setTimeout(() => { throw new Error('the CLI fails'); }, 200);
      });`;
    const cli = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    cli.stdout.on('data', (d) => (out += String(d)));
    cli.stderr.on('data', (d) => (out += String(d)));
    const code = await new Promise<number | null>((r) => cli.once('exit', (c) => r(c)));
    expect(out).toContain('the CLI fails');
    expect(code).not.toBe(0);
    const pid = Number(/pid (\d+)/.exec(out)?.[1]);
    expect(pid, out).toBeGreaterThan(0);
    await waitFor(() => !alive(pid), { timeoutMs: 10_000, what: `the notifier (pid ${pid}) to be gone with the CLI that started it` });
  }, 30_000);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
