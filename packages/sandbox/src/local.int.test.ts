import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pgTest as test, waitFor } from '@baton/testing';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { findBwrap } from './confine.ts';
import { sandboxContract } from './contract.ts';
import { LocalSandboxProvider, workspaceSizeProblem } from './local.ts';
import { DEFAULT_LIMITS, SandboxFencedError, WorkspaceTooLargeError, type SandboxSpec } from './provider.ts';

let root: string;
let outside: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-sbx-'));
  outside = await mkdtemp(path.join(tmpdir(), 'baton-host-'));
  await writeFile(path.join(outside, 'secret.txt'), 'host secret');
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ taskId: randomUUID(), agentId: 'engineer-1', network: false, env: {}, limits: { ...DEFAULT_LIMITS, memoryMb: 512, processes: 64 }, attempt: 1, ...over });
const hasBwrap = findBwrap() !== null;

sandboxContract('local', (pool) => new LocalSandboxProvider({ root, pool }), { commands: hasBwrap });

describe('local sandbox provider', () => {
  test('files and commands share the workspace; a pause frees the host and any replica resumes from Postgres', async ({ pg }) => {
    const a = new LocalSandboxProvider({ root: path.join(root, 'a'), pool: pg.db.pool });
    const s = spec();
    const sbx = await a.open(s);
    expect(await sbx.files.write('src/app.txt', 'v1')).toBe('created');
    await sbx.sync();
    await a.pause(sbx);
    await expect(readFile(path.join(root, 'a', s.taskId, s.agentId, 'src/app.txt'))).rejects.toThrow(/ENOENT/); // nothing held locally
    // Another replica (its own directory) resumes the paused sandbox with attempt 2.
    const b = new LocalSandboxProvider({ root: path.join(root, 'b'), pool: pg.db.pool });
    const resumed = await b.open({ ...s, attempt: 2 });
    expect(await resumed.files.read('src/app.txt')).toBe('v1');
    expect((await resumed.files.walk()).files.map((f) => f.path)).toEqual(['src/app.txt']);
    // The older attempt is fenced out: it can no longer sync over the newer one's workspace.
    await expect(a.open(s)).rejects.toThrow(SandboxFencedError);
    await a.kill(s.taskId, s.agentId);
    expect((await pg.db.pool.query('select state from sandboxes where id = $1', [`${s.taskId}/${s.agentId}`])).rows[0]?.state).toBe('killed');
  });

  test('files past what one statement carries (60 MB here) sync in batches, in one transaction, and resume elsewhere whole', async ({ pg }) => {
    const a = new LocalSandboxProvider({ root: path.join(root, 'a'), pool: pg.db.pool });
    const s = spec();
    const sbx = await a.open(s);
    const big = (n: number) => Buffer.alloc(19_000_000, n);
    for (const n of [1, 2, 3]) await sbx.files.write(`data/${n}.bin`, big(n));
    await sbx.files.write('small.txt', 'x');
    await sbx.sync();
    await a.pause(sbx);
    const resumed = await new LocalSandboxProvider({ root: path.join(root, 'b'), pool: pg.db.pool }).open({ ...s, attempt: 2 });
    expect((await resumed.files.walk()).files.map((f) => [f.path, f.size])).toEqual([['data/1.bin', 19_000_000], ['data/2.bin', 19_000_000], ['data/3.bin', 19_000_000], ['small.txt', 1]]);
    expect((await resumed.files.readBytes('data/3.bin')).bytes.equals(big(3))).toBe(true);
  });

  test('a workspace past its limit saves nothing more (WorkspaceTooLargeError names the total and the largest files); back under it, it saves again', async ({ pg }) => {
    const p = new LocalSandboxProvider({ root, pool: pg.db.pool, maxWorkspaceBytes: 1024 * 1024 });
    const s = spec();
    const sbx = await p.open(s);
    await sbx.files.write('keep.txt', 'v1');
    await sbx.sync();
    const saved = async () => (await pg.db.pool.query('select path, length(content)::int as n from sandbox_files where sandbox_id = $1 order by path', [`${s.taskId}/${s.agentId}`])).rows;
    const generation = async () => Number((await pg.db.pool.query('select generation from sandboxes where id = $1', [`${s.taskId}/${s.agentId}`])).rows[0].generation);
    const before = await generation();
    await sbx.files.write('out/big.bin', Buffer.alloc(900 * 1024, 1));
    await sbx.files.write('out/more.bin', Buffer.alloc(300 * 1024, 2));
    await sbx.files.write('keep.txt', 'v2');
    // Dependency directories are not saved, and not counted either.
    await sbx.files.write('node_modules/dep/index.js', Buffer.alloc(2 * 1024 * 1024, 3));
    const err = await sbx.sync().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkspaceTooLargeError);
    expect((err as WorkspaceTooLargeError).code).toBe('workspace_too_large');
    expect((err as Error).message).toBe('the workspace holds 1.2 MiB in 3 files, over its limit of 1 MiB (SANDBOX_MAX_WORKSPACE_BYTES): nothing since its last save was kept; the largest: out/big.bin (900 KiB), out/more.bin (300 KiB), keep.txt (2 bytes)');
    expect(await saved()).toEqual([{ path: 'keep.txt', n: 2 }]);
    expect(await generation()).toBe(before);
    await sbx.files.remove('out/big.bin');
    await sbx.sync();
    expect(await saved()).toEqual([{ path: 'keep.txt', n: 2 }, { path: 'out/more.bin', n: 300 * 1024 }]);
    expect((await sbx.files.readBytes('keep.txt')).bytes.toString()).toBe('v2');
  });

  test('the limit is a pure rule: the total against the limit, and words naming the largest files', () => {
    expect(workspaceSizeProblem([{ path: 'a', size: 10 }], 10)).toBeNull();
    expect(workspaceSizeProblem([{ path: 'b', size: 6 }, { path: 'a', size: 6 }], 10)).toBe('the workspace holds 12 bytes in 2 files, over its limit of 10 bytes (SANDBOX_MAX_WORKSPACE_BYTES): nothing since its last save was kept; the largest: a (6 bytes), b (6 bytes)');
  });

  test('sweep kills the sandboxes of tasks that are no longer live', async ({ pg }) => {
    const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
    const live = spec();
    const dead = spec();
    await (await p.open(live)).files.write('a.txt', 'x');
    await (await p.open(dead)).files.write('a.txt', 'x');
    expect(await p.sweep(async (ids) => new Map(ids.map((i) => [i, i === live.taskId ? 'live' : 'finished'] as const)))).toBe(1);
    await expect(readFile(path.join(root, dead.taskId, dead.agentId, 'a.txt'))).rejects.toThrow(/ENOENT/);
    expect(await readFile(path.join(root, live.taskId, live.agentId, 'a.txt'), 'utf8')).toBe('x');
  });

  describe.runIf(hasBwrap)('confinement (bubblewrap)', () => {
    test('a command runs in the workspace with a cleared environment, and its changes sync', async ({ pg }) => {
      process.env.BATON_TEST_SECRET = 'do-not-leak';
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec({ env: { GREETING: 'hello' } }));
      await sbx.files.write('in.txt', 'input');
      const r = await sbx.run('cat in.txt > out.txt; mkdir -p node_modules/x && echo 1 > node_modules/x/i.js; echo "$GREETING ${BATON_TEST_SECRET:-unset} $(pwd)"; exit 3', { timeoutMs: 20_000 });
      expect(r).toMatchObject({ exitCode: 3, timedOut: false, stdout: 'hello unset /workspace\n' });
      expect(await sbx.files.read('out.txt')).toBe('input');
      await sbx.sync();
      const rows = await pg.db.pool.query('select path from sandbox_files where sandbox_id = $1 order by path', [sbx.id]);
      expect(rows.rows.map((x) => x.path)).toEqual(['in.txt', 'out.txt']); // node_modules is not synced (re-creatable)
    });

    test('escapes: no write outside the workspace, no host files, no network', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec());
      const r = await sbx.run(
        [
          `cat ${outside}/secret.txt 2>&1 || echo no-host-file`,
          `echo pwned > ${outside}/pwned.txt 2>&1 || echo no-host-write`,
          'echo x > /usr/pwned 2>&1 || echo no-system-write',
          'cat ../../../../etc/passwd 2>&1 || echo no-etc',
          '(exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && echo NET-OPEN || echo no-network',
        ].join('; '),
        { timeoutMs: 20_000 },
      );
      expect(r.stdout).toMatch(/no-host-file/);
      expect(r.stdout).toMatch(/no-host-write/);
      expect(r.stdout).toMatch(/no-system-write/);
      expect(r.stdout).toMatch(/no-etc/);
      expect(r.stdout).toMatch(/no-network/);
      expect(r.stdout).not.toMatch(/host secret|NET-OPEN/);
      await expect(readFile(path.join(outside, 'pwned.txt'))).rejects.toThrow(/ENOENT/);
    });

    test('network only when the agent is allowed it', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const probe = '(exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && echo open || echo closed';
      expect((await (await p.open(spec())).run(probe, { timeoutMs: 20_000 })).stdout).toBe('closed\n');
      expect((await (await p.open(spec({ network: true }))).run(probe, { timeoutMs: 20_000 })).stdout).toBe('open\n');
    });

    test('escapes: a symlink made inside the sandbox is never followed by host-side file code', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec());
      await sbx.run(`ln -s ${outside}/secret.txt leak; ln -s ${outside} dir`, { timeoutMs: 20_000 });
      await expect(sbx.files.read('leak')).rejects.toThrow(/symbolic link/);
      await expect(sbx.files.write('dir/new.txt', 'x')).rejects.toThrow(/symbolic link/);
      await expect(sbx.files.read('/etc/passwd')).rejects.toThrow(/absolute paths/);
      await expect(sbx.files.read('../x')).rejects.toThrow(/'\.\.' is not allowed/);
      await expect(sbx.files.remove('dir/secret.txt')).rejects.toThrow(/symbolic link/);
      await sbx.sync(); // links are not regular files: nothing of the host is copied to Postgres
      const rows = await pg.db.pool.query('select path from sandbox_files where sandbox_id = $1', [sbx.id]);
      expect(rows.rows).toEqual([]);
      await expect(readFile(path.join(outside, 'new.txt'))).rejects.toThrow(/ENOENT/);
      // Removing a link removes the link, never what it points to.
      await sbx.files.remove('leak');
      await sbx.files.remove('dir');
      expect(await sbx.files.list('.')).toEqual([]);
      expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('host secret');
    });

    test('exhaustion: a fork bomb, a memory hog and a runaway command are stopped, and the host is fine', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec());
      const bomb = await sbx.run(':(){ :|:& };: ; sleep 2; echo survived', { timeoutMs: 8_000 });
      expect(bomb.stderr + bomb.stdout).toMatch(/fork|Resource temporarily unavailable|retry/i);
      const hog = await sbx.run(`node -e "const a = []; for (;;) a.push(Buffer.alloc(64 * 1024 * 1024, 1))"`, { timeoutMs: 20_000 });
      expect(hog.exitCode).not.toBe(0);
      expect(hog.timedOut).toBe(false);
      const started = Date.now();
      const runaway = await sbx.run('while :; do :; done', { timeoutMs: 1_500 });
      expect(runaway).toMatchObject({ timedOut: true, exitCode: null });
      expect(Date.now() - started).toBeLessThan(10_000);
      // A duration of its own, so that no other `sleep 300` on the host (a person's, a script's) passes for the orphan.
      const nap = `sleep 300.${String(Date.now() % 1_000_000).padStart(6, '0')}`;
      const orphan = await sbx.run(`(${nap} &) ; echo started`, { timeoutMs: 5_000 });
      expect(orphan.stdout).toBe('started\n');
      // Everything the sandbox started dies with it: no sandbox process is left on the host. (The
      // kernel kills what is left in the sandbox's PID namespace as its init exits, and bwrap may
      // report the command's exit a moment before that is done: wait for it, a few seconds at most.)
      const { execFileSync } = await import('node:child_process');
      // The orphan is the process whose command is exactly that (any other process naming it — bwrap's
      // own command line while it exits, a grep run by hand on the host — is not the orphan).
      const orphanLeft = (): boolean => execFileSync('ps', ['-eo', 'args']).toString().split('\n').some((l) => l.trim() === nap);
      await waitFor(() => !orphanLeft(), { timeoutMs: 5_000, what: `the orphaned ${nap} killed` }).catch((e: unknown) => {
        // Say what is left, and where it hangs: pid, parent, state and command of every process that names it.
        const left = execFileSync('ps', ['-eo', 'pid,ppid,pgid,stat,etimes,user,args']).toString().split('\n').filter((l, i) => i === 0 || l.includes(nap) || /bwrap|defunct/.test(l));
        throw new Error(`${(e as Error).message}\n${left.join('\n')}`);
      });
      expect((await sbx.run('echo alive', { timeoutMs: 5_000 })).stdout).toBe('alive\n');
    });

    test.runIf(new LocalSandboxProvider({ root: tmpdir(), pool: null as never }).cgroupControllers.includes('memory'))('exhaustion: processes together are held to the sandbox\'s memory (cgroup), not only each one', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec());
      // Four processes of 300 MiB each fit under the per-process limit, but not under the 512 MiB of the sandbox together.
      const r = await sbx.run('for i in 1 2 3 4; do (python3 -c "import time; a = bytearray(300 * 1024 * 1024); time.sleep(2)"; echo "exit $?") & done; wait', { timeoutMs: 30_000 });
      const exits = r.stdout.trim().split('\n');
      expect(exits).toHaveLength(4);
      expect(exits.some((e) => e !== 'exit 0')).toBe(true);
      expect((await sbx.run('echo alive', { timeoutMs: 5_000 })).stdout).toBe('alive\n');
    });

    test('output is capped and counted: its first and last 500 KB kept, what is left out between said', async ({ pg }) => {
      const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
      const sbx = await p.open(spec());
      const r = await sbx.run('head -c 3000000 /dev/zero | tr "\\0" a', { timeoutMs: 20_000 });
      expect(r.stdout).toBe(`${'a'.repeat(500_000)}\n[… 2000000 bytes left out here …]\n${'a'.repeat(500_000)}`);
      expect(r.stdoutBytes).toBe(3_000_000);
    });
  });
});
