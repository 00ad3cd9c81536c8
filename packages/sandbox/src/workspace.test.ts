import { execFileSync } from 'node:child_process';
import { lstat, mkdtemp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Workspace } from './workspace.ts';

let base: string;
let ws: Workspace;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'baton-ws-'));
  ws = new Workspace(path.join(base, 'ws'));
  await ws.ensure();
  await writeFile(path.join(base, 'secret.txt'), 'host secret');
});
afterEach(async () => rm(base, { recursive: true, force: true }));

describe('Workspace', () => {
  it('writes, reads and lists inside the workspace, reporting created vs modified', async () => {
    expect(await ws.write('a/b.md', 'one')).toBe('created');
    expect(await ws.write('./a//b.md', 'two')).toBe('modified');
    expect(await ws.read('a/b.md')).toBe('two');
    expect(await ws.list('.')).toEqual(['a/']);
  });
  it("says what went wrong by the workspace's own path, never the host's (the model reads it)", async () => {
    const missing = await ws.read('web/x.ts').then(() => null, (e: Error & { code?: string }) => e);
    expect([missing?.message, missing?.code]).toEqual(['web/x.ts: no such file or directory', 'ENOENT']);
    await ws.write('f.txt', 'x');
    await expect(ws.list('f.txt')).rejects.toThrow(/^f\.txt: a part of the path is a file, not a directory$/);
    await expect(ws.write('f.txt/under', 'x')).rejects.toThrow(/^f\.txt\/under: /);
    for (const op of [() => ws.read('nope/a'), () => ws.list('nope'), () => ws.write('f.txt/under', 'x')]) {
      const err = await op().then(() => null, (e: Error) => e);
      expect(err?.message).not.toContain(ws.root);
    }
  });
  it('a named pipe a command left is never opened: a write replaces it (opening it blocked a runner thread for good), a read refuses it; a directory is not written over', async () => {
    await mkdir(path.join(base, 'ws', 'api'), { recursive: true });
    execFileSync('mkfifo', [path.join(base, 'ws', 'api/routes.ts')]);
    await expect(ws.read('api/routes.ts')).rejects.toThrow(/not a regular file/);
    expect(await ws.write('api/routes.ts', 'restored')).toBe('modified');
    expect(await readFile(path.join(base, 'ws', 'api/routes.ts'), 'utf8')).toBe('restored');
    expect((await lstat(path.join(base, 'ws', 'api/routes.ts'))).isFile()).toBe(true);
    await expect(ws.write('api', 'x')).rejects.toThrow(/^api: is a directory, not a file$/);
  });
  it('refuses absolute paths, .. and NUL bytes', async () => {
    await expect(ws.read('/etc/passwd')).rejects.toThrow(/absolute paths are not allowed/);
    await expect(ws.read('../secret.txt')).rejects.toThrow(/'\.\.' is not allowed/);
    await expect(ws.write('a/../../secret.txt', 'x')).rejects.toThrow(/'\.\.' is not allowed/);
    await expect(ws.read('a\0b')).rejects.toThrow(/NUL/);
  });
  it('never follows a symlink planted in the workspace — file, directory or dangling', async () => {
    await symlink(path.join(base, 'secret.txt'), path.join(ws.root, 'evil'));
    await symlink(base, path.join(ws.root, 'dir'));
    await symlink(path.join(base, 'not-yet'), path.join(ws.root, 'dangling'));
    await expect(ws.read('evil')).rejects.toThrow(/symbolic link/);
    await expect(ws.write('evil', 'overwrite')).rejects.toThrow(/symbolic link/);
    await expect(ws.read('dir/secret.txt')).rejects.toThrow(/symbolic link/);
    await expect(ws.write('dir/new.txt', 'x')).rejects.toThrow(/symbolic link/);
    await expect(ws.write('dangling', 'x')).rejects.toThrow(/symbolic link/);
    await expect(ws.list('dir')).rejects.toThrow(/symbolic link/);
    expect(await readFile(path.join(base, 'secret.txt'), 'utf8')).toBe('host secret');
    await expect(readFile(path.join(base, 'not-yet'), 'utf8')).rejects.toThrow(/ENOENT/);
    await mkdir(path.join(ws.root, 'ok'));
    expect(await ws.list('.')).toEqual(['dangling@', 'dir@', 'evil@', 'ok/']);
  });
});
