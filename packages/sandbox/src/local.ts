import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readdir, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { formatBytes, REGENERATED_DIRS } from '@baton/domain';
import type pg from 'pg';
import { Cgroups } from './cgroups.ts';
import { confinedArgv, findBwrap, runArgv } from './confine.ts';
import { sandboxIdOf, WorkspaceTooLargeError, type CommandResult, type RunOptions, type Sandbox, type SandboxFiles, type SandboxProvider, type SandboxSpec, type TaskLiveness } from './provider.ts';
import { SandboxRegistry, type StoredFile } from './registry.ts';
import { resolveToolchain, type SandboxToolchain, type ToolchainOption } from './toolchain.ts';
import { Workspace, type WalkedFile } from './workspace.ts';

export interface LocalProviderOptions {
  /** Host directory holding `<taskId>/<agentId>` workspaces. */
  root: string;
  pool: pg.Pool;
  /** Override the bubblewrap binary (default: found on PATH; absent → commands are refused with a clear error). */
  bwrap?: string | null;
  /** Largest workspace file synced to Postgres (bigger ones stay local and are reported). */
  maxSyncFileBytes?: number;
  /**
   * The most a workspace's files may hold, together (dependency directories such as node_modules
   * not counted: they are not saved). A sync past it saves nothing and throws
   * WorkspaceTooLargeError: what a runaway command writes reaches neither Postgres nor, for
   * longer than the agent's turn, the host's disk. Default DEFAULT_MAX_WORKSPACE_BYTES.
   */
  maxWorkspaceBytes?: number;
  /** Per-sandbox cgroups (default: detected; null turns them off). */
  cgroups?: Cgroups | null;
  /**
   * What commands get read-only at /opt/baton/node and /opt/baton/node_modules (on PATH):
   * per field a host path, null for none, or left out to detect it — the runner's own Node
   * and the repository's node_modules holding vitest (`detectToolchain`).
   */
  toolchain?: ToolchainOption;
}

/** Commands cannot run: bubblewrap is missing (the file tools still work). */
export class SandboxUnavailableError extends Error {
  readonly code = 'sandbox_unavailable';
  constructor(why: string) {
    super(why);
    this.name = new.target.name;
  }
}

/**
 * The local provider: a per-agent workspace directory on the runner's host, commands confined
 * with bubblewrap, and the workspace synced to Postgres after every step — so "pause" frees
 * the host entirely and any replica resumes from the last synced generation.
 */
export class LocalSandboxProvider implements SandboxProvider {
  readonly name = 'local';
  private readonly root: string;
  private readonly registry: SandboxRegistry;
  private readonly bwrap: string | null;
  private readonly maxSyncFileBytes: number;
  private readonly maxWorkspaceBytes: number;
  /** The generation each local workspace directory holds (a restart forgets, and restores). */
  private readonly localGeneration = new Map<string, number>();
  private readonly cgroups: Cgroups | null;
  /** The host directories lent to commands (read-only). */
  readonly toolchain: SandboxToolchain;

  constructor(opts: LocalProviderOptions) {
    this.root = path.resolve(opts.root);
    this.registry = new SandboxRegistry(opts.pool);
    this.bwrap = opts.bwrap === undefined ? findBwrap() : opts.bwrap;
    this.maxSyncFileBytes = opts.maxSyncFileBytes ?? 20_000_000;
    this.maxWorkspaceBytes = opts.maxWorkspaceBytes ?? DEFAULT_MAX_WORKSPACE_BYTES;
    this.cgroups = opts.cgroups === undefined ? Cgroups.detect() : opts.cgroups;
    this.toolchain = resolveToolchain(opts.toolchain);
  }

  /** The controllers (memory, pids) that hold a sandbox's processes together, if any. */
  get cgroupControllers(): string[] {
    return this.cgroups?.controllers ?? [];
  }

  /**
   * Why this runner cannot make workspaces under its root (null: it can): the root made if
   * missing, a file written and removed there, within `timeoutMs` (a path under /proc can hang a
   * recursive mkdir for ever). Checked at start, so a runner that could only fail every agent
   * says so and stops instead of reporting ready.
   */
  async rootProblem(timeoutMs = 5000): Promise<string | null> {
    const probe = path.join(this.root, `.baton-probe-${process.pid}`);
    const check = (async (): Promise<string | null> => {
      await mkdir(this.root, { recursive: true });
      await writeFile(probe, 'ok');
      await rm(probe, { force: true });
      return null;
    })().catch((err: unknown) => `cannot make workspaces under ${this.root}: ${(err as Error).message}`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`cannot make workspaces under ${this.root}: no answer from the file system within ${timeoutMs} ms`), timeoutMs)));
    try {
      return await Promise.race([check, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Commands can run here (bubblewrap found). */
  get canRunCommands(): boolean {
    return this.bwrap !== null;
  }

  async open(spec: SandboxSpec): Promise<Sandbox> {
    const id = sandboxIdOf(spec.taskId, spec.agentId);
    const row = await this.registry.claim(id, spec.taskId, spec.agentId, this.name, spec.attempt);
    const user = sandboxUser(id);
    const dir = path.join(this.root, spec.taskId, spec.agentId);
    await mkdir(dir, { recursive: true });
    // The sandbox user must reach its workspace through the runner's directories.
    for (const d of [this.root, path.join(this.root, spec.taskId)]) await chmod(d, 0o711);
    const ws = new Workspace(dir, { owner: user });
    await ws.ensure();
    let manifest: Map<string, string>;
    if (this.localGeneration.get(id) === row.generation) {
      manifest = manifestOf((await syncedFiles(ws)).files);
    } else {
      // Another replica (or an earlier life of this one) moved it on: restore the synced copy.
      await ws.clear();
      const { generation, files } = await this.registry.loadFiles(id);
      await ws.restore(files);
      manifest = manifestOf((await syncedFiles(ws)).files);
      this.localGeneration.set(id, generation);
    }
    return new LocalSandbox(id, ws, {
      run: (command, opts) => this.runIn(ws, spec, user, command, opts),
      sync: async () => {
        const { files, truncated } = await syncedFiles(ws);
        const problem = workspaceSizeProblem(files, this.maxWorkspaceBytes);
        if (problem) throw new WorkspaceTooLargeError(problem);
        const next = manifestOf(files);
        const changed: StoredFile[] = [];
        for (const f of files) {
          if (manifest.get(f.path) === next.get(f.path) || f.size > this.maxSyncFileBytes) continue;
          const { bytes, mode } = await ws.readBytes(f.path, this.maxSyncFileBytes);
          changed.push({ path: f.path, mode, content: bytes });
        }
        // A walk cut short says nothing about the files it did not reach: remove nothing then.
        const removed = truncated ? [] : [...manifest.keys()].filter((p) => !next.has(p));
        if (changed.length === 0 && removed.length === 0) return;
        const generation = await this.registry.saveFiles(id, spec.attempt, changed, removed);
        this.localGeneration.set(id, generation);
        manifest = next;
      },
    });
  }

  async pause(sandbox: Sandbox): Promise<void> {
    await sandbox.sync();
    await this.registry.setState(sandbox.id, 'paused');
    // Hold nothing on this host while the agent waits: the synced copy is the workspace now.
    this.localGeneration.delete(sandbox.id);
    const [taskId, agentId] = sandbox.id.split('/') as [string, string];
    await removeTree(path.join(this.root, taskId, agentId));
  }

  async kill(taskId: string, agentId: string): Promise<void> {
    const id = sandboxIdOf(taskId, agentId);
    this.localGeneration.delete(id);
    await this.cgroups?.remove(cgroupName({ taskId, agentId }));
    await removeTree(path.join(this.root, taskId, agentId));
    await rmdir(path.join(this.root, taskId)).catch(() => {}); // only once it is empty
    await this.registry.killed(id);
  }

  async sweep(liveness: TaskLiveness): Promise<number> {
    const rows = await this.registry.live(this.name);
    const localTasks = (await readdir(this.root).catch(() => [] as string[])).filter((t) => /^[0-9a-f-]{36}$/.test(t));
    const taskIds = [...new Set([...rows.map((r) => r.taskId), ...localTasks])];
    if (taskIds.length === 0) return 0;
    const known = await liveness(taskIds);
    let swept = 0;
    // The registry's rows are this deployment's own: killed unless their task is live.
    // One that cannot be removed does not stop the others: each is tried, then the failures are named.
    const failures: string[] = [];
    for (const r of rows) {
      if (known.get(r.taskId) === 'live') continue;
      try {
        await this.kill(r.taskId, r.agentId);
        swept++;
      } catch (err) {
        failures.push(`${r.taskId}/${r.agentId}: ${(err as Error).message}`);
      }
    }
    // Files left under the root: removed only for a task this deployment knows as finished. A task
    // it does not know is another deployment's sharing this root (the default is per host): left alone.
    for (const t of localTasks) if (known.get(t) === 'finished') await removeTree(path.join(this.root, t)).catch((err: Error) => void failures.push(`${t}: ${err.message}`));
    if (failures.length > 0) throw new Error(`swept ${swept}; could not remove ${failures.length}: ${failures.join('; ')}`);
    return swept;
  }

  private async runIn(ws: Workspace, spec: SandboxSpec, user: { uid: number; gid: number } | null, command: string, opts: RunOptions): Promise<CommandResult> {
    if (!this.bwrap) throw new SandboxUnavailableError('commands cannot run: bubblewrap (bwrap) is not installed on this runner (apt-get install bubblewrap)');
    const cwd = opts.cwd ? path.relative(ws.root, ws.resolve(opts.cwd)) : '.';
    const name = cgroupName(spec);
    const cgroups = this.cgroups?.create(name, spec.limits) ?? [];
    const argv = confinedArgv(command, { workspace: ws.root, cwd, network: spec.network, env: spec.env, limits: spec.limits, user, bwrap: this.bwrap, cgroups, toolchain: this.toolchain });
    try {
      return await runArgv(argv, { timeoutMs: opts.timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) });
    } finally {
      await this.cgroups?.remove(name);
    }
  }
}

class LocalSandbox implements Sandbox {
  readonly provider = 'local';
  readonly id: string;
  readonly files: SandboxFiles;
  private readonly ops: { run: (command: string, opts: RunOptions) => Promise<CommandResult>; sync: () => Promise<void> };
  constructor(id: string, ws: Workspace, ops: LocalSandbox['ops']) {
    this.id = id;
    this.ops = ops;
    this.files = {
      read: (p, maxBytes) => ws.read(p, maxBytes),
      readBytes: (p, maxBytes) => ws.readBytes(p, maxBytes),
      write: (p, content, mode) => ws.write(p, content, mode),
      remove: (p) => ws.remove(p),
      list: (p) => ws.list(p),
      walk: (p, limit, opts) => ws.walk(p, limit, opts),
    };
  }

  run(command: string, opts: RunOptions): Promise<CommandResult> {
    return this.ops.run(command, opts);
  }

  sync(): Promise<void> {
    return this.ops.sync();
  }
}

/** A local workspace's default limit (SANDBOX_MAX_WORKSPACE_BYTES): 1 GiB. */
export const DEFAULT_MAX_WORKSPACE_BYTES = 1024 * 1024 * 1024;

/**
 * Why a workspace's files are too many bytes to keep, or null (pure): their total and the
 * largest few, in words an agent's reader can act on.
 */
export function workspaceSizeProblem(files: readonly { path: string; size: number }[], limit: number): string | null {
  const total = files.reduce((n, f) => n + f.size, 0);
  if (total <= limit) return null;
  const largest = [...files].sort((a, b) => b.size - a.size || a.path.localeCompare(b.path)).slice(0, 3);
  return `the workspace holds ${formatBytes(total)} in ${files.length.toLocaleString('en-US')} files, over its limit of ${formatBytes(limit)} (SANDBOX_MAX_WORKSPACE_BYTES): nothing since its last save was kept; the largest: ${largest.map((f) => `${f.path} (${formatBytes(f.size)})`).join(', ')}`;
}

/** Directories a command can re-create (dependency installs, caches) are not copied to Postgres. */
const UNSYNCED_DIRS: ReadonlySet<string> = new Set([...REGENERATED_DIRS, '.cache']);
const MAX_SYNCED_FILES = 100_000;

/** The files of a workspace that are kept in Postgres. */
const syncedFiles = (ws: Workspace) => ws.walk('.', MAX_SYNCED_FILES, { skipDirs: UNSYNCED_DIRS });

const manifestOf = (files: readonly WalkedFile[]): Map<string, string> => new Map(files.map((f) => [f.path, `${f.size}:${f.changedMs}:${f.mode}`]));

const cgroupName = (spec: Pick<SandboxSpec, 'taskId' | 'agentId'>): string => createHash('sha256').update(sandboxIdOf(spec.taskId, spec.agentId)).digest('hex').slice(0, 16);

/**
 * The unprivileged user a sandbox's commands run as when the runner is root: one of 4,096 uids
 * from 200000, by the sandbox id, so RLIMIT_NPROC counts (about) one sandbox's processes.
 * Not root → the runner's own user (bubblewrap then maps it in a user namespace).
 */
export function sandboxUser(id: string): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const n = createHash('sha256').update(id).digest().readUInt16BE(0) % 4096;
  return { uid: 200_000 + n, gid: 200_000 + n };
}

/**
 * Remove a directory tree, however deep: a command may leave paths longer than the system takes
 * whole (ENAMETOOLONG for Node's recursive rm), which the system's `rm -rf` removes step by step.
 */
export async function removeTree(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENAMETOOLONG') throw err;
    await promisify(execFile)('rm', ['-rf', '--one-file-system', '--', dir]);
  }
}
