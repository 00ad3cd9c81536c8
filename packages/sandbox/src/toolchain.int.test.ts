import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pgTest as test } from '@baton/testing';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { findBwrap } from './confine.ts';
import { E2BSandboxProvider } from './e2b.ts';
import { FakeE2B } from './fake-e2b.ts';
import { LocalSandboxProvider } from './local.ts';
import { DEFAULT_LIMITS, type Sandbox, type SandboxSpec } from './provider.ts';

// The example project a task can start from (examples/inventory): its vitest suite must run
// in a sandbox with no network and no node_modules, on the toolchain the sandbox lends.
const EXAMPLE = path.resolve(import.meta.dirname, '../../../examples/inventory');
const TEST_COMMAND = 'vitest run';
const hasBwrap = findBwrap() !== null;

let root: string;
const fake = new FakeE2B();
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-toolchain-'));
  await fake.start();
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await fake.stop();
});

const spec = (): SandboxSpec => ({ taskId: randomUUID(), agentId: 'engineer-1', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 });

/** Copy the example into the sandbox through its file API (what starting a task from it does). */
async function copyExample(sbx: Sandbox, dir = ''): Promise<string[]> {
  const copied: string[] = [];
  for (const e of await readdir(path.join(EXAMPLE, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') copied.push(...(await copyExample(sbx, rel)));
    } else if (e.isFile()) {
      await sbx.files.write(rel, await readFile(path.join(EXAMPLE, rel)));
      copied.push(rel);
    }
  }
  return copied.sort();
}

const plain = (s: string): string => s.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '');

/** Green, then red after one implementation file is broken (exactly one test depends on it). */
async function greenThenRed(sbx: Sandbox): Promise<void> {
  const green = await sbx.run(TEST_COMMAND, { timeoutMs: 120_000 });
  const out = plain(green.stdout + green.stderr);
  expect(green.exitCode, out).toBe(0);
  const counts = /Tests\s+(\d+) passed \((\d+)\)/.exec(out);
  expect(counts, out).not.toBeNull();
  expect(Number(counts?.[1])).toBeGreaterThanOrEqual(10);
  expect(counts?.[1]).toBe(counts?.[2]);

  const file = 'api/inventory.ts';
  const source = await sbx.files.read(file);
  const broken = source.replace('total += item.quantity * item.unitPriceCents', 'total += item.unitPriceCents');
  expect(broken).not.toBe(source);
  await sbx.files.write(file, broken);
  const red = await sbx.run(TEST_COMMAND, { timeoutMs: 120_000 });
  const redOut = plain(red.stdout + red.stderr);
  expect(red.exitCode, redOut).toBe(1);
  expect(redOut).toMatch(/Tests\s+1 failed \| \d+ passed \(\d+\)/);
  expect(redOut).toMatch(/values the stock on hand/);
}

describe('the example project runs its tests offline in a sandbox', () => {
  const local = hasBwrap ? `local (bubblewrap, no network, default limits): \`${TEST_COMMAND}\`` : 'local: SKIPPED — bubblewrap (bwrap) is not installed here, so local sandboxes cannot run commands';
  test.skipIf(!hasBwrap)(local, async ({ pg }) => {
    const p = new LocalSandboxProvider({ root, pool: pg.db.pool });
    expect(p.toolchain.node, 'the runner\'s Node install is lent to the sandbox').not.toBeNull();
    expect(p.toolchain.nodeModules, 'a node_modules holding vitest is lent to the sandbox').not.toBeNull();
    const s = spec();
    const sbx = await p.open(s);
    const copied = await copyExample(sbx);
    expect(copied).toContain('package.json');
    // Nothing of the toolchain is in the workspace, and the command has no way to fetch it.
    const probe = await sbx.run('[ -e node_modules ] || echo no-node_modules; (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null || echo no-network; node -v; command -v vitest', { timeoutMs: 20_000 });
    expect(probe.stdout).toMatch(/^no-node_modules\nno-network\nv\d+\.\d+\.\d+\n\/opt\/baton\/node_modules\/\.bin\/vitest\n$/);
    await greenThenRed(sbx);
    // Vitest's cache went to node_modules/.vite in the workspace, which is not synced.
    await sbx.sync();
    const synced = await pg.db.pool.query<{ path: string }>('select path from sandbox_files where sandbox_id = $1 order by path', [sbx.id]);
    expect(synced.rows.map((r) => r.path)).toEqual(copied);
    await p.kill(s.taskId, s.agentId);
  });

  test(`e2b (fake envd; the template's toolchain stands in as this runner's): \`${TEST_COMMAND}\``, async ({ pg }) => {
    const p = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url });
    const sbx = await p.open(spec());
    await copyExample(sbx);
    await greenThenRed(sbx);
  });
});
