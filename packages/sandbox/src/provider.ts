import { z } from 'zod';
import { NamedError } from '@baton/domain';
import type { SkippedEntry, WalkedFile } from './workspace.ts';

/** Resource limits of one sandbox's commands (agent config `sandbox.limits`). */
export const SandboxLimits = z.strictObject({
  /** Address space per process, MiB (RLIMIT_AS locally; the template's memory on E2B). */
  memoryMb: z.number().int().min(64).max(65_536).default(1024),
  /** CPU seconds per process (RLIMIT_CPU). */
  cpuSeconds: z.number().int().min(1).max(3600).default(120),
  /** Processes of the sandbox user (RLIMIT_NPROC): a fork bomb stops here. */
  processes: z.number().int().min(8).max(4096).default(128),
  /** Largest file a command may write, MiB (RLIMIT_FSIZE). */
  fileSizeMb: z.number().int().min(1).max(10_240).default(100),
  /** Open files per process (RLIMIT_NOFILE). */
  openFiles: z.number().int().min(16).max(65_536).default(1024),
});
export type SandboxLimits = z.infer<typeof SandboxLimits>;
export const DEFAULT_LIMITS: SandboxLimits = SandboxLimits.parse({});

/** What a sandbox is for: one agent of one task. Its id is stable, so any replica finds it again. */
export interface SandboxSpec {
  taskId: string;
  agentId: string;
  /** Outbound network for commands (default off). */
  network: boolean;
  /** Environment variables for commands: nothing from the host unless the agent's config names it. */
  env: Record<string, string>;
  limits: SandboxLimits;
  /** The runner's attempt on this agent: a sandbox opened by a newer attempt fences older ones out. */
  attempt: number;
}

export const sandboxIdOf = (taskId: string, agentId: string): string => `${taskId}/${agentId}`;

export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** Killed at the wall-clock timeout. */
  timedOut: boolean;
  durationMs: number;
  /** Output beyond the capture limit was dropped (the counts say how much there was). */
  stdoutBytes: number;
  stderrBytes: number;
}

export interface RunOptions {
  timeoutMs: number;
  /** Working directory relative to the workspace root (default the root). */
  cwd?: string;
  signal?: AbortSignal;
}

/** The files of a sandbox's workspace. Paths are relative to the workspace root; escapes are refused. */
export interface SandboxFiles {
  read(path: string, maxBytes?: number): Promise<string>;
  /** Up to maxBytes of a file, with its full size and permission bits (`mode & 0o777`). */
  readBytes(path: string, maxBytes?: number): Promise<{ bytes: Buffer; size: number; mode: number }>;
  /**
   * Write a file. `mode` (permission bits): the file has exactly these after; without it a new
   * file is 0644 and an existing one keeps its own (an agent's write to a script keeps it executable).
   */
  write(path: string, content: string | Uint8Array, mode?: number): Promise<'created' | 'modified'>;
  /** Remove a file, or a directory with everything in it. A missing one is not an error; the workspace root cannot be removed. */
  remove(path: string): Promise<void>;
  list(path: string): Promise<string[]>;
  /**
   * Every regular file under a path, at most `limit` (`truncated` says when there were more);
   * `skipDirs`: directory names not descended into (node_modules…). `skipped`: entries left out
   * that a workspace cannot hold (a name no path can carry, a link, a device or fifo), at most
   * MAX_SKIPPED_REPORTED, each with why — so what leaves them out can say so.
   */
  walk(path?: string, limit?: number, opts?: { skipDirs?: ReadonlySet<string> }): Promise<{ files: WalkedFile[]; truncated: boolean; skipped: SkippedEntry[] }>;
}

export interface Sandbox {
  readonly id: string;
  readonly provider: string;
  readonly files: SandboxFiles;
  run(command: string, opts: RunOptions): Promise<CommandResult>;
  /**
   * Make the workspace durable centrally (Postgres for the local provider; E2B keeps its own):
   * after it returns, a runner anywhere resumes from this state.
   */
  sync(): Promise<void>;
}

/**
 * The one contract every sandbox provider implements. The runner opens a sandbox for each job
 * (creating it, or reconnecting to the paused one), pauses it when the agent waits for a
 * person, and kills it when the agent is done.
 */
export interface SandboxProvider {
  readonly name: string;
  /** Create the sandbox, or reconnect to it (restoring its last synced workspace). */
  open(spec: SandboxSpec): Promise<Sandbox>;
  /** The agent waits: hold no compute. The workspace survives and `open` resumes it anywhere. */
  pause(sandbox: Sandbox): Promise<void>;
  /** The agent is done: free everything. Idempotent; killing an unknown sandbox is fine. */
  kill(taskId: string, agentId: string): Promise<void>;
  /**
   * Kill every sandbox whose task is no longer live (a crash left them); returns how many. Only
   * what is this deployment's: its own registry's sandboxes, and files of tasks its log knows
   * as finished — never a task it does not know (another deployment's sharing the host's root).
   */
  sweep(liveness: TaskLiveness): Promise<number>;
}

/** What this deployment's log says of these tasks: live or finished; a task it does not know is absent. */
export type TaskLiveness = (taskIds: string[]) => Promise<Map<string, 'live' | 'finished'>>;

/**
 * A local workspace grew past its limit (`maxWorkspaceBytes`): nothing since its last save is
 * kept, and the agent fails with this message (the runner does not retry what would grow again).
 */
export class WorkspaceTooLargeError extends Error {
  readonly code = 'workspace_too_large';
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The sandbox service could not open the agent's sandbox for now — an outage (5xx), a rate limit,
 * a timeout, a cut connection: the runner's job waits it out (an E2B outage of seconds had failed
 * every agent).
 */
export class SandboxOutageError extends NamedError {
  readonly code = 'sandbox_outage';
}

/** The sandbox service refused for good — a setting to mend (the key, the template): the agent fails with these words. */
export class SandboxRefusedError extends NamedError {
  readonly code = 'sandbox_refused';
}

/** A sandbox opened by a newer attempt: this runner must stop. */
export class SandboxFencedError extends Error {
  readonly code = 'sandbox_fenced';
  constructor(id: string, attempt: number) {
    super(`sandbox ${id} belongs to a newer attempt than ${attempt}`);
    this.name = new.target.name;
  }
}
