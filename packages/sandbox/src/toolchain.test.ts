import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADDRESS_SPACE_HEADROOM_MB, confinedArgv } from './confine.ts';
import { DEFAULT_LIMITS } from './provider.ts';
import { detectToolchain, findNodeModules, nodePrefixOf, resolveToolchain, TOOLCHAIN_MOUNTS } from './toolchain.ts';

const repo = path.resolve(import.meta.dirname, '../../..');

describe('the sandbox toolchain', () => {
  it('is detected from the running process and the repository', () => {
    const t = detectToolchain();
    expect(t.node).not.toBeNull();
    expect(existsSync(path.join(t.node as string, 'bin', 'node'))).toBe(true);
    // The repository's root node_modules (its links stay inside it), not this package's own.
    expect(t.nodeModules).toBe(path.join(repo, 'node_modules'));
    expect(findNodeModules(path.join(repo, 'packages', 'sandbox'))).toBe(path.join(repo, 'node_modules'));
  });

  it('finds the install prefix of a node binary, and nothing where there is none', () => {
    expect(nodePrefixOf(process.execPath)).toBe(path.dirname(path.dirname(process.execPath)));
    expect(nodePrefixOf('/nonexistent/bin/node')).toBeNull();
  });

  it('checks the paths it is given, and lends nothing when told so', () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'toolchain-'));
    try {
      expect(() => resolveToolchain({ node: empty })).toThrow(/not a Node install prefix/);
      expect(() => resolveToolchain({ nodeModules: path.join(empty, 'missing') })).toThrow(/not a directory/);
      expect(resolveToolchain({ node: null, nodeModules: null })).toEqual({ node: null, nodeModules: null });
      expect(findNodeModules(empty)).toBeNull();
    } finally {
      rmSync(empty, { recursive: true });
    }
  });

  it('is bound read-only at fixed paths, first on PATH; address space leaves room for what runtimes reserve', () => {
    const base = { workspace: '/w', cwd: '.', network: false, env: {}, limits: DEFAULT_LIMITS, user: null, bwrap: '/usr/bin/bwrap' };
    const argv = confinedArgv('vitest run', { ...base, toolchain: { node: '/host/node', nodeModules: '/host/repo/node_modules' } });
    const joined = argv.join(' ');
    expect(joined).toContain(`--ro-bind /host/node ${TOOLCHAIN_MOUNTS.node}`);
    expect(joined).toContain(`--ro-bind /host/repo/node_modules ${TOOLCHAIN_MOUNTS.nodeModules}`);
    expect(joined).toContain('--setenv PATH /opt/baton/node/bin:/opt/baton/node_modules/.bin:/usr/local/bin:/usr/bin:/bin');
    expect(joined).toContain('--setenv npm_config_cache /tmp/.npm');
    expect(joined).toContain(`--as=${(DEFAULT_LIMITS.memoryMb + ADDRESS_SPACE_HEADROOM_MB) * 1024 * 1024}`);
    const bare = confinedArgv('true', base).join(' ');
    expect(bare).not.toContain('/opt/baton');
    expect(bare).toContain('--setenv PATH /usr/local/bin:/usr/bin:/bin');
  });
});
