import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import type pg from 'pg';
import { describe, expect } from 'vitest';
import { DEFAULT_LIMITS, type SandboxProvider, type SandboxSpec } from './provider.ts';

/**
 * The SandboxProvider contract, shared by every provider's tests: each provider must behave
 * the same to the runner. `make` gives a provider as one runner replica would have it (called
 * twice for the "another replica resumes" case).
 */
export function sandboxContract(name: string, make: (pool: pg.Pool) => Promise<SandboxProvider> | SandboxProvider, opts: { commands: boolean }): void {
  const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ taskId: randomUUID(), agentId: 'agent-1', network: false, env: { GIVEN: 'given' }, limits: DEFAULT_LIMITS, attempt: 1, ...over });

  describe(`SandboxProvider contract: ${name}`, () => {
    test('files: write (created, then modified), read, list, walk; escapes refused', async ({ pg }) => {
      const sbx = await (await make(pg.db.pool)).open(spec());
      expect(await sbx.files.write('a/b.txt', 'one')).toBe('created');
      expect(await sbx.files.write('a/b.txt', 'two')).toBe('modified');
      await sbx.files.write('top.md', new TextEncoder().encode('bytes'));
      expect(await sbx.files.read('a/b.txt')).toBe('two');
      expect((await sbx.files.readBytes('top.md')).bytes.toString()).toBe('bytes');
      expect(await sbx.files.list('.')).toEqual(['a/', 'top.md']);
      expect((await sbx.files.walk()).files.map((f) => [f.path, f.size])).toEqual([['a/b.txt', 3], ['top.md', 5]]);
      await expect(sbx.files.read('../x')).rejects.toThrow(/'\.\.' is not allowed/);
      await expect(sbx.files.write('/etc/x', 'x')).rejects.toThrow(/absolute paths/);
    });

    test('files: a mode given is the file\'s after (new or existing, up or down); without one a new file is 0644 and an existing one keeps its own; it survives a resume', async ({ pg }) => {
      const s = spec();
      const p = await make(pg.db.pool);
      const sbx = await p.open(s);
      await sbx.files.write('run.sh', '#!/bin/sh\n', 0o755);
      await sbx.files.write('plain.txt', 'x');
      await sbx.files.write('down.sh', 'y', 0o755);
      await sbx.files.write('down.sh', 'y', 0o644);
      await sbx.files.write('plain.txt', 'x2', 0o700);
      expect((await sbx.files.readBytes('run.sh')).mode).toBe(0o755);
      expect((await sbx.files.readBytes('plain.txt')).mode).toBe(0o700);
      expect((await sbx.files.readBytes('down.sh')).mode).toBe(0o644);
      await sbx.files.write('run.sh', '#!/bin/sh\necho\n'); // no mode: it stays executable
      expect((await sbx.files.readBytes('run.sh')).mode).toBe(0o755);
      await sbx.files.write('new.txt', 'n');
      expect((await sbx.files.readBytes('new.txt')).mode).toBe(0o644);
      await sbx.sync();
      await p.pause(sbx);
      const again = await (await make(pg.db.pool)).open(s);
      expect((await again.files.walk()).files.map((f) => [f.path, f.mode])).toEqual([['down.sh', 0o644], ['new.txt', 0o644], ['plain.txt', 0o700], ['run.sh', 0o755]]);
    });

    test('files: remove a file or a whole directory, a missing one is fine, escapes and the root refused; it stays removed on resume', async ({ pg }) => {
      const s = spec();
      const p = await make(pg.db.pool);
      const sbx = await p.open(s);
      for (const f of ['keep.txt', 'gone.txt', 'dir/a/b.txt', 'dir/a/c/d.txt', 'dir/e.txt']) await sbx.files.write(f, f);
      await sbx.sync();
      await sbx.files.remove('gone.txt');
      await sbx.files.remove('dir/a');
      await sbx.files.remove('gone.txt'); // again: already gone
      await sbx.files.remove('never/was.txt');
      expect((await sbx.files.walk()).files.map((f) => f.path)).toEqual(['dir/e.txt', 'keep.txt']);
      await expect(sbx.files.remove('../x')).rejects.toThrow(/'\.\.' is not allowed/);
      await expect(sbx.files.remove('/etc/hostname')).rejects.toThrow(/absolute paths/);
      await expect(sbx.files.remove('.')).rejects.toThrow(/workspace itself/);
      await sbx.sync();
      await p.pause(sbx);
      const resumed = await (await make(pg.db.pool)).open({ ...s, attempt: 2 });
      expect((await resumed.files.walk()).files.map((f) => f.path)).toEqual(['dir/e.txt', 'keep.txt']);
    });

    test('pause, then another replica resumes it with its files; kill frees it, and a new one starts empty', async ({ pg }) => {
      const s = spec();
      const a = await make(pg.db.pool);
      const sbx = await a.open(s);
      await sbx.files.write('notes.md', 'kept');
      await sbx.sync();
      await a.pause(sbx);
      const b = await make(pg.db.pool);
      const resumed = await b.open({ ...s, attempt: 2 });
      expect(await resumed.files.read('notes.md')).toBe('kept');
      await b.kill(s.taskId, s.agentId);
      const fresh = await b.open({ ...s, attempt: 3 });
      expect((await fresh.files.walk()).files).toEqual([]);
    });

    test.runIf(opts.commands)('commands: exit code, output, the named env only, cwd, and a wall-clock timeout', async ({ pg }) => {
      process.env.CONTRACT_HOST_ONLY = 'leak';
      const sbx = await (await make(pg.db.pool)).open(spec());
      await sbx.files.write('dir/in.txt', 'input');
      const r = await sbx.run('cat in.txt; echo " $GIVEN ${CONTRACT_HOST_ONLY:-none}"; echo err >&2; exit 4', { timeoutMs: 20_000, cwd: 'dir' });
      expect(r).toMatchObject({ exitCode: 4, timedOut: false, stdout: 'input given none\n', stderr: 'err\n' });
      await sbx.run('echo made > made.txt', { timeoutMs: 20_000 });
      expect(await sbx.files.read('made.txt')).toBe('made\n');
      // Names a command makes that no path can carry (a backslash, a line break) are left out of
      // walks, so a sync still goes through; a path with a backslash is refused, not split.
      await sbx.run(`printf x > 'back\\slash.txt'; mkdir -p 'odd\\dir' && printf y > 'odd\\dir/in.txt'; printf z > "$(printf 'line\\nbreak.txt')"`, { timeoutMs: 20_000 });
      expect((await sbx.files.walk()).files.map((f) => f.path)).toEqual(['dir/in.txt', 'made.txt']);
      await sbx.sync();
      await expect(sbx.files.read('back\\slash.txt')).rejects.toThrow(/contains a backslash: directories are separated by '\/'/);
      const slow = await sbx.run('sleep 30', { timeoutMs: 1000 });
      expect(slow).toMatchObject({ timedOut: true, exitCode: null });
      expect(slow.durationMs).toBeLessThan(15_000);
    });
  });
}
