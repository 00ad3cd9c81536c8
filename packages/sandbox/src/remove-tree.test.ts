import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { removeTree } from './local.ts';
import { Workspace } from './workspace.ts';

it('a tree deeper than a path may be long (a command made it): a walk goes past it, removeTree removes it (Node alone fails with ENAMETOOLONG)', async () => {
  const base = await mkdtemp(path.join(tmpdir(), 'baton-deep-'));
  try {
    const dir = path.join(base, 'agent');
    // 40 levels of 200-character names: 8,000 characters, past PATH_MAX (4,096).
    execFileSync('bash', ['-c', `mkdir -p "$1" && cd "$1" && for i in $(seq 40); do d=$(printf 'd%.0s' $(seq 200)); mkdir "$d" && cd "$d"; done && touch leaf`, '_', dir]);
    // A walk of the workspace goes past what no path can name, instead of failing (with the host's path in its message).
    execFileSync('bash', ['-c', 'mkdir -p "$1/src" && echo x > "$1/src/a.ts"', '_', dir]);
    expect((await new Workspace(dir).walk()).files.map((f) => f.path)).toEqual(['src/a.ts']);
    await expect(rm(dir, { recursive: true, force: true })).rejects.toMatchObject({ code: 'ENAMETOOLONG' });
    await removeTree(dir);
    expect(existsSync(dir)).toBe(false);
    await removeTree(dir); // gone already: fine
  } finally {
    execFileSync('rm', ['-rf', base]);
  }
});
