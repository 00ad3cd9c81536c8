import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The tools lent to sandboxed commands, read-only: a Node install and a node_modules tree
 * holding vitest (the test runner agents' `test_command`s use). Workspaces never hold
 * node_modules, and commands have no network by default, so this is how `vitest run` works
 * in a sandbox at all. Host paths; the local provider binds them at fixed paths
 * (`TOOLCHAIN_MOUNTS`), the fake E2B puts them on PATH as they are.
 */
export interface SandboxToolchain {
  /** A Node install prefix (the directory holding `bin/node`); null: none lent. */
  node: string | null;
  /**
   * A node_modules directory whose `vitest` lives inside it (pnpm's root node_modules, whose
   * packages are relative links into its own `.pnpm`, or an npm install); its `.bin` goes on
   * PATH. null: none lent.
   */
  nodeModules: string | null;
}

/**
 * The packages the toolchain holds besides Node, at the repository's versions: the E2B
 * template and the runner's Docker image install these (a test checks they match the root
 * package.json and the Dockerfile), so a test command behaves the same on every provider.
 */
export const TOOLCHAIN_PACKAGES = ['vitest@4.1.12', 'typescript@5.9.3'] as const;

/** Where a local sandbox sees its toolchain (read-only binds). */
export const TOOLCHAIN_MOUNTS = { node: '/opt/baton/node', nodeModules: '/opt/baton/node_modules' } as const;

/** Per field: a path, null for none, or undefined to detect it (`detectToolchain`). */
export type ToolchainOption = { node?: string | null; nodeModules?: string | null };

/**
 * The toolchain of this runner: its own Node (the install prefix of `process.execPath`) and
 * the nearest node_modules above this package that holds vitest (the repository's, in
 * development). Either is null when not found — in the runner's image the node_modules is
 * named by SANDBOX_TOOLCHAIN_NODE_MODULES instead (infra/docker/Dockerfile).
 */
export function detectToolchain(): SandboxToolchain {
  return { node: nodePrefixOf(process.execPath), nodeModules: findNodeModules(import.meta.dirname) };
}

/**
 * Resolve a toolchain option: undefined fields are detected, named paths are checked (a
 * wrong path fails at start-up rather than in an agent's test run).
 */
export function resolveToolchain(opt: ToolchainOption = {}): SandboxToolchain {
  const detected = opt.node === undefined || opt.nodeModules === undefined ? detectToolchain() : null;
  const node = opt.node === undefined ? (detected?.node ?? null) : opt.node;
  const nodeModules = opt.nodeModules === undefined ? (detected?.nodeModules ?? null) : opt.nodeModules;
  if (node !== null && !isExecutable(path.join(node, 'bin', 'node'))) throw new Error(`sandbox toolchain: ${node} is not a Node install prefix (no bin/node)`);
  if (nodeModules !== null && !statSync(nodeModules, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`sandbox toolchain: ${nodeModules} is not a directory`);
  return { node: node && path.resolve(node), nodeModules: nodeModules && path.resolve(nodeModules) };
}

/** The directories to put first on PATH for a toolchain at these places (node's bin, then .bin). */
export function toolchainPath(t: SandboxToolchain): string[] {
  return [...(t.node ? [path.posix.join(t.node, 'bin')] : []), ...(t.nodeModules ? [path.posix.join(t.nodeModules, '.bin')] : [])];
}

/** The install prefix of a Node binary (`<prefix>/bin/node`, links resolved), or null. */
export function nodePrefixOf(execPath: string): string | null {
  let real: string;
  try {
    real = realpathSync(execPath);
  } catch {
    return null;
  }
  const bin = path.dirname(real);
  return path.basename(bin) === 'bin' ? path.dirname(bin) : null;
}

/**
 * The nearest `node_modules` at or above `from` that holds vitest inside itself. A pnpm
 * package's own node_modules links outside itself (`../../../node_modules/.pnpm/…`), so bound
 * alone it would dangle; the workspace root's links stay inside, so it can be bound whole.
 */
export function findNodeModules(from: string): string | null {
  for (let dir = path.resolve(from); ; dir = path.dirname(dir)) {
    const nm = path.join(dir, 'node_modules');
    if (existsSync(path.join(nm, '.bin', 'vitest'))) {
      try {
        const real = realpathSync(nm);
        if (realpathSync(path.join(nm, 'vitest')).startsWith(real + path.sep)) return nm;
      } catch {
        // a dangling link: not this one
      }
    }
    if (path.dirname(dir) === dir) return null;
  }
}

function isExecutable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
