import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type { CommandResult, SandboxLimits } from './provider.ts';
import { TOOLCHAIN_MOUNTS, toolchainPath, type SandboxToolchain } from './toolchain.ts';

export interface ConfineOptions {
  /** Host directory mounted read-write at /workspace: the only writable place (with a private /tmp). */
  workspace: string;
  /** Working directory inside /workspace. */
  cwd: string;
  network: boolean;
  env: Record<string, string>;
  limits: SandboxLimits;
  /** Run as this user (the runner must be root to switch); null keeps the runner's own user. */
  user: { uid: number; gid: number } | null;
  bwrap: string;
  /** Cgroup directories the command joins first (the sandbox's total memory and processes). */
  cgroups?: readonly string[];
  /**
   * Host directories lent read-only: a Node install at /opt/baton/node and a node_modules
   * (vitest) at /opt/baton/node_modules, their bin directories first on PATH.
   */
  toolchain?: SandboxToolchain;
}

const MIB = 1024 * 1024;
/**
 * Address space a process may reserve beyond the sandbox's memory: runtimes reserve far more
 * than they touch (Node 24 reserves ~1.3 GB at start with 40 MB resident, and a vitest worker
 * ~1.9 GB), so RLIMIT_AS at the memory limit itself would stop Node from starting at all.
 * What is really used is held by the sandbox's memory cgroup, where the runner can make one.
 */
export const ADDRESS_SPACE_HEADROOM_MB = 2048;

/** A word as a POSIX shell reads it back unchanged: single-quoted, its own single quotes closed and escaped. */
export const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The command line that confines one command (pure, so it can be checked line by line):
 * setpriv drops to the sandbox user, prlimit sets the per-process limits, and bubblewrap puts
 * the command in fresh namespaces — its own session (no terminal injection), no network unless
 * allowed, its own pid namespace (everything dies with it), a read-only view of the system and
 * an environment holding only what is named.
 */
export function confinedArgv(command: string, o: ConfineOptions): string[] {
  const l = o.limits;
  const drop = o.user ? ['setpriv', `--reuid=${o.user.uid}`, `--regid=${o.user.gid}`, '--clear-groups', '--inh-caps=-all', '--'] : [];
  const limits = ['prlimit', `--as=${(l.memoryMb + ADDRESS_SPACE_HEADROOM_MB) * MIB}`, `--cpu=${l.cpuSeconds}`, `--nproc=${l.processes}`, `--fsize=${l.fileSizeMb * MIB}`, `--nofile=${l.openFiles}`, `--core=0`, '--'];
  const t = o.toolchain ?? { node: null, nodeModules: null };
  const mounted = { node: t.node && TOOLCHAIN_MOUNTS.node, nodeModules: t.nodeModules && TOOLCHAIN_MOUNTS.nodeModules };
  const PATH = [...toolchainPath(mounted), '/usr/local/bin', '/usr/bin', '/bin'].join(':');
  // npm's cache and logs go to the private /tmp, not HOME (the workspace, which is synced).
  const env = { PATH, HOME: '/workspace', LANG: 'C.UTF-8', TMPDIR: '/tmp', npm_config_cache: '/tmp/.npm', npm_config_update_notifier: 'false', PIP_CACHE_DIR: '/tmp/.pip', ...o.env };
  const cwd = path.posix.join('/workspace', o.cwd);
  if (!cwd.startsWith('/workspace')) throw new Error(`cwd '${o.cwd}' is outside the workspace`);
  // Join the cgroups before anything else runs, so every descendant is counted.
  const join = o.cgroups?.length ? ['/bin/sh', '-c', 'for g in "$@"; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 126; shift; done; shift; exec "$@"', 'join-cgroups', ...o.cgroups, '--'] : [];
  return [
    ...join,
    ...drop,
    ...limits,
    o.bwrap,
    '--new-session',
    '--die-with-parent',
    '--unshare-all',
    ...(o.network ? ['--share-net', '--ro-bind-try', '/etc/resolv.conf', '/etc/resolv.conf', '--ro-bind-try', '/etc/hosts', '/etc/hosts'] : []),
    '--hostname', 'sandbox',
    '--ro-bind', '/usr', '/usr',
    '--symlink', 'usr/bin', '/bin',
    '--symlink', 'usr/sbin', '/sbin',
    '--symlink', 'usr/lib', '/lib',
    '--symlink', 'usr/lib64', '/lib64',
    '--ro-bind-try', '/etc/alternatives', '/etc/alternatives',
    '--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache',
    '--ro-bind-try', '/etc/ssl', '/etc/ssl',
    ...(t.node ? ['--ro-bind', t.node, TOOLCHAIN_MOUNTS.node] : []),
    ...(t.nodeModules ? ['--ro-bind', t.nodeModules, TOOLCHAIN_MOUNTS.nodeModules] : []),
    '--proc', '/proc',
    '--dev', '/dev',
    '--tmpfs', '/tmp',
    '--bind', o.workspace, '/workspace',
    '--chdir', cwd,
    '--clearenv',
    ...Object.entries(env).flatMap(([k, v]) => ['--setenv', k, v]),
    '--',
    '/bin/bash', '-c', command,
  ];
}

/** The bubblewrap binary on PATH, or null (then commands cannot run locally; file tools still work). */
export function findBwrap(envPath = process.env.PATH ?? ''): string | null {
  for (const dir of envPath.split(':').concat(['/usr/bin', '/usr/local/bin'])) {
    if (!dir) continue;
    const p = path.join(dir, 'bwrap');
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

const CAPTURE_BYTES = 1_000_000;

/**
 * Run a command line with a wall-clock timeout. At the timeout (or on abort) the whole process
 * group is killed with SIGKILL; bubblewrap's pid namespace takes every descendant with it.
 * Output beyond 1 MB per stream is counted, and kept only at its start and its end (`capture`).
 */
export function runArgv(argv: string[], opts: { timeoutMs: number; signal?: AbortSignal }): Promise<CommandResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const [file, ...args] = argv as [string, ...string[]];
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: {} });
    const out = capture();
    const err = capture();
    child.stdout.on('data', out.push);
    child.stderr.on('data', err.push);
    let timedOut = false;
    const kill = (): void => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    const onAbort = (): void => kill();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (e) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ exitCode: timedOut ? null : code, stdout: out.text(), stderr: err.text(), timedOut, durationMs: Date.now() - started, stdoutBytes: out.total(), stderrBytes: err.total() });
    });
  });
}

/** Where the UTF-8 character that holds byte `end - 1` begins, when that character is cut at `end` (else `end`). */
function charEdgeBefore(b: Buffer, end: number): number {
  let i = end;
  while (i > 0 && end - i < 4 && ((b[i - 1] as number) & 0xc0) === 0x80) i--;
  if (i === 0) return end;
  const lead = b[i - 1] as number;
  const size = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return end - (i - 1) < size ? i - 1 : end;
}

/**
 * One stream's output, kept up to CAPTURE_BYTES: its first half and its last half (a ring), so a
 * summary printed last — a test runner's counts — survives output of any size (the first 1 MB
 * alone had lost pytest's summary, and the run read as no tests). What is left out between them
 * is said there, in bytes.
 */
export function capture(limit = CAPTURE_BYTES) {
  const headLimit = Math.floor(limit / 2);
  const tailLimit = limit - headLimit;
  const head: Buffer[] = [];
  let headKept = 0;
  let tail: Buffer[] = [];
  let tailKept = 0;
  let total = 0;
  return {
    push: (b: Buffer): void => {
      total += b.length;
      if (headKept < headLimit) {
        const part = b.subarray(0, headLimit - headKept);
        head.push(part);
        headKept += part.length;
        b = b.subarray(part.length);
        if (b.length === 0) return;
      }
      tail.push(b);
      tailKept += b.length;
      if (tailKept > tailLimit * 2) {
        // Compact now and then: the last tailLimit bytes in one buffer.
        const all = Buffer.concat(tail);
        tail = [all.subarray(all.length - tailLimit)];
        tailKept = tailLimit;
      }
    },
    text: (): string => {
      const all = Buffer.concat(tail);
      const last = all.subarray(Math.max(0, all.length - tailLimit));
      const left = total - headKept - last.length;
      // Nothing left out: decoded as one (a character across the halves stays whole). Else each
      // cut at a character's edge: the head's end and the tail's start drop a character's split part.
      if (left === 0) return Buffer.concat([...head, last]).toString('utf8');
      const first = Buffer.concat(head);
      const headEnd = charEdgeBefore(first, first.length);
      let tailStart = 0;
      while (tailStart < last.length && tailStart < 4 && ((last[tailStart] as number) & 0xc0) === 0x80) tailStart++;
      return `${first.subarray(0, headEnd).toString('utf8')}\n[… ${left + (first.length - headEnd) + tailStart} bytes left out here …]\n${last.subarray(tailStart).toString('utf8')}`;
    },
    total: (): number => total,
  };
}
