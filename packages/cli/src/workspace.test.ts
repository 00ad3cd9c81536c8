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
  test('a plain directory: every file but .git and node_modules, at any depth (before: only the top ones were left out)', async () => {
    await put({ 'src/a.ts': 'a', 'node_modules/x/i.js': 'x', 'packages/p/node_modules/y/i.js': 'y', 'packages/p/src/b.ts': 'b', 'vendor/lib/.git/HEAD': 'h', '.env': 'SECRET=1' });
    expect(await entries(dir)).toEqual(['.env', 'packages/p/src/b.ts', 'src/a.ts']);
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

  test("a refused workspace's entries are printed one a line, all of them (the message names the first few)", () => {
    const body = { error: { code: 'invalid_workspace', message: 'invalid workspace archive: 2 entries refused', details: [{ entry: 'a\nb', message: 'the path contains a control character' }, { entry: 'x', message: 'symbolic link' }] } };
    expect(entryProblems(body)).toEqual(['"a\\nb": the path contains a control character', '"x": symbolic link']);
    expect(entryProblems({ error: { code: 'validation_error', message: 'm', details: [{ field: 'body.prompt', message: 'required' }] } })).toEqual([]);
    expect(entryProblems(null)).toEqual([]);
  });
});
