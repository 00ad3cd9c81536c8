import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sourcesDigest, workspaceSources } from './index.ts';

describe("the console's sources digest (a build is redone when it changes)", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  /** packages/{console, client, api, domain, other}: the console depends on client (and api, as a dev dependency), api on domain. */
  const workspace = async (): Promise<{ root: string; write: (rel: string, text: string) => Promise<void> }> => {
    const base = await mkdtemp(path.join(tmpdir(), 'baton-console-digest-'));
    dirs.push(base);
    const write = async (rel: string, text: string): Promise<void> => {
      await mkdir(path.dirname(path.join(base, rel)), { recursive: true });
      await writeFile(path.join(base, rel), text);
    };
    await write('console/package.json', JSON.stringify({ dependencies: { '@baton/client': 'workspace:*', react: '19' }, devDependencies: { '@baton/api': 'workspace:*' } }));
    await write('console/ui/App.tsx', 'export const App = 1;');
    await write('client/package.json', JSON.stringify({ dependencies: {} }));
    await write('client/src/index.ts', 'export const follow = 1;');
    await write('api/package.json', JSON.stringify({ dependencies: { '@baton/domain': 'workspace:*' }, devDependencies: { '@baton/testing': 'workspace:*' } }));
    await write('api/src/view.ts', 'export const view = 1;');
    await write('domain/package.json', JSON.stringify({}));
    await write('domain/src/fold.ts', 'export const fold = 1;');
    await write('other/package.json', JSON.stringify({}));
    await write('other/src/x.ts', 'export const x = 1;');
    return { root: path.join(base, 'console'), write };
  };

  it('covers the workspace packages the bundle takes code from, transitively (not their dev dependencies)', async () => {
    const { root } = await workspace();
    expect(workspaceSources(root)).toEqual(['../api/src', '../api/package.json', '../domain/src', '../domain/package.json', '../client/src', '../client/package.json']);
  });

  it('changes with the client or a package it reaches, not with an unrelated one', async () => {
    const { root, write } = await workspace();
    const before = sourcesDigest(root);
    await write('other/src/x.ts', 'export const x = 2;');
    expect(sourcesDigest(root)).toBe(before);
    await write('client/src/index.ts', 'export const follow = 2;');
    const afterClient = sourcesDigest(root);
    expect(afterClient).not.toBe(before);
    await write('domain/src/fold.ts', 'export const fold = 2;');
    expect(sourcesDigest(root)).not.toBe(afterClient);
  });
});
