import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { entryProblems } from './views.ts';
import { workspaceFromPath } from './workspace.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'baton-cli-ws-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

const put = async (files: Record<string, string>): Promise<void> => {
  for (const [p, c] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, p)), { recursive: true });
    await writeFile(path.join(dir, p), c);
  }
};
const entries = async (p: string): Promise<string[]> => {
  const { archiveBase64 } = await workspaceFromPath(p);
  return execFileSync('tar', ['-tzf', '-'], { input: Buffer.from(archiveBase64, 'base64') }).toString().split('\n').filter((e) => e !== '' && !e.endsWith('/')).map((e) => e.replace(/^\.\//, '')).sort();
};

describe('baton submit --workspace <dir>', () => {
  test('a plain directory: every file but .git, node_modules and the caches tools make again, at any depth (before: only the top ones were left out; a .venv was sent and refused whole for its links)', async () => {
    await put({ 'src/a.ts': 'a', 'node_modules/x/i.js': 'x', 'packages/p/node_modules/y/i.js': 'y', 'packages/p/src/b.ts': 'b', 'vendor/lib/.git/HEAD': 'h', '.env': 'SECRET=1', '.venv/bin/activate': 'v', 'pkg/__pycache__/m.cpython-311.pyc': 'c', '.pytest_cache/README.md': 'r', 'pkg/m.py': 'm' });
    expect(await entries(dir)).toEqual(['.env', 'packages/p/src/b.ts', 'pkg/m.py', 'src/a.ts']);
  });

  test('a git work tree: what git would commit — .gitignore honoured (no .env, no build output), untracked files kept, a tracked file deleted from disk left out', async () => {
    await put({ '.gitignore': '.env\ndist/\n', '.env': 'SECRET=hunter2', 'dist/out.js': 'built', 'src/a.ts': 'a', 'src/gone.ts': 'g', 'my notes.txt': 'n', 'packages/p/node_modules/y/i.js': 'y' });
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd: dir, stdio: 'pipe' });
    git('init', '-q');
    git('add', '.gitignore', 'src');
    git('commit', '-qm', 'i');
    await rm(path.join(dir, 'src/gone.ts'));
    await put({ 'src/new.ts': 'new, untracked' });
    expect(await entries(dir)).toEqual(['.gitignore', 'my notes.txt', 'src/a.ts', 'src/new.ts']);
    // A directory inside the work tree: its files, relative to it.
    expect(await entries(path.join(dir, 'src'))).toEqual(['a.ts', 'new.ts']);
  });

  test("a repository inside the tree (an untracked clone, a submodule) is listed by its own git — its .gitignore holds (its .env was sent); a name that is not UTF-8 goes as it is, for the gateway to refuse (it vanished)", async () => {
    const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', '-c', 'protocol.file.allow=always', ...args], { cwd, stdio: 'pipe' });
    await put({ 'src/a.ts': 'a', 'nested/.gitignore': '.env\n', 'nested/.env': 'SECRET', 'nested/lib.ts': 'l' });
    git(dir, 'init', '-q');
    git(path.join(dir, 'nested'), 'init', '-q');
    await writeFile(Buffer.from(path.join(dir, 'src', 'caf\u00e9.txt'), 'latin1'), 'x');
    git(dir, 'add', 'src');
    git(dir, 'commit', '-qm', 'i');
    // A submodule, its .gitignore ignoring its .env.
    const upstream = await mkdtemp(path.join(tmpdir(), 'baton-cli-sub-'));
    await writeFile(path.join(upstream, '.gitignore'), '.env\n');
    await writeFile(path.join(upstream, 'mod.ts'), 'm');
    git(upstream, 'init', '-q');
    git(upstream, 'add', '.');
    git(upstream, 'commit', '-qm', 'sub');
    git(dir, 'submodule', 'add', '-q', upstream, 'mods/lib');
    await writeFile(path.join(dir, 'mods', 'lib', '.env'), 'SUBSECRET');
    const { archiveBase64 } = await workspaceFromPath(dir);
    await rm(upstream, { recursive: true, force: true });
    const names = execFileSync('tar', ['-tzf', '-'], { input: Buffer.from(archiveBase64, 'base64') }).toString('latin1').split('\n').filter(Boolean).sort();
    expect(names).toEqual(['.gitmodules', 'mods/lib/.gitignore', 'mods/lib/mod.ts', 'nested/.gitignore', 'nested/lib.ts', 'src/a.ts', 'src/caf\\351.txt']); // the byte 0xe9 as it was (tar -t shows it in octal)
  });

  test('git refusing the tree is an error, not every file sent; a directory .gitignore ignores whole is refused, not sent empty', async () => {
    await put({ '.gitignore': 'dist/\n', 'dist/out.js': 'built', 'src/a.ts': 'a' });
    execFileSync('git', ['init', '-q'], { cwd: dir });
    await expect(workspaceFromPath(path.join(dir, 'dist'))).rejects.toThrow(/git would commit no file of .*dist \(\.gitignore ignores them all\): archive the directory yourself/);
    await writeFile(path.join(dir, '.git', 'index'), 'not an index');
    await expect(workspaceFromPath(dir)).rejects.toThrow(/^--workspace: git could not list the files of .*\(.*index.*\); mend that, or archive the directory yourself/);
  });

  test("a refused workspace's entries are printed one a line, all of them (the message names the first few)", () => {
    const body = { error: { code: 'invalid_workspace', message: 'invalid workspace archive: 2 entries refused', details: [{ entry: 'a\nb', message: 'the path contains a control character' }, { entry: 'x', message: 'symbolic link' }] } };
    expect(entryProblems(body)).toEqual(['"a\\nb": the path contains a control character', '"x": symbolic link']);
    expect(entryProblems({ error: { code: 'validation_error', message: 'm', details: [{ field: 'body.prompt', message: 'required' }] } })).toEqual([]);
    expect(entryProblems(null)).toEqual([]);
  });
});
