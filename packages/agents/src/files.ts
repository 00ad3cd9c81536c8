import path from 'node:path';
import { insideGit, normalPath, withinLocks, type TaskState } from '@baton/domain';

/** Tools that may change the workspace: after them it is synced before their results are recorded. */
export const MUTATING_TOOLS: ReadonlySet<string> = new Set(['write_file', 'edit_file', 'run_command', 'run_tests']);
const WRITES: ReadonlySet<string> = new Set(['write_file', 'edit_file']);
const PATH_TOOLS: ReadonlySet<string> = new Set(['write_file', 'edit_file', 'read_file', 'list_directory']);

const matches = (p: string, globs: readonly string[]): boolean => globs.some((g) => path.posix.matchesGlob(p, g));

/**
 * What an agent may change: its config's `file_scope` (nothing matching `blocked`; only what
 * matches `allowed`, if given) and, for a subtask of a plan, its file locks (only what they
 * match). Locks never widen the scope: a path must pass both.
 */
export interface WritePolicy {
  scope?: { allowed: string[]; blocked: string[] } | undefined;
  /** null: no locks (the scope alone decides). */
  locks: readonly string[] | null;
}

/** What an agent may change, from its definition and the task's state: its file scope, and its subtask's locks (the lead has none). */
export function writePolicyOf(def: { fileScope?: { allowed: string[]; blocked: string[] } | undefined }, state: TaskState, agentId: string): WritePolicy {
  return { scope: def.fileScope, locks: state.lead?.agentId === agentId ? null : (state.agents[agentId]?.fileLocks ?? null) };
}

/** Why the agent may not create, change or delete `p` (a normalised workspace path), or null. */
export function writeRefusal(policy: WritePolicy, p: string): string | null {
  const { scope, locks } = policy;
  // Version control's own state (a hook, a config) is not the project's, whatever the locks'
  // globs match ('{.git,src}/**', '.*/**'): written there it would reach the task's files and
  // run on the machine of whoever applies the change. (A command's changes under .git are never
  // reported, so never kept.)
  if (insideGit(p)) return `'${p}' is inside .git (version control's own state, not the project): no agent's file tools change it`;
  const blocked = blockedRefusal(policy, p);
  if (blocked) return blocked;
  if (scope && scope.allowed.length > 0 && !matches(p, scope.allowed)) return `'${p}' is outside this agent's file scope (writes allowed: ${scope.allowed.join(', ')})`;
  if (locks && !withinLocks(p, locks)) return `'${p}' is outside this subtask's file locks (${locks.length > 0 ? locks.join(', ') : 'none: it may not change files'})`;
  return null;
}

/** The policy restricts anything at all (else a command's side effects need no checking). */
export const restricts = (policy: WritePolicy): boolean => policy.locks !== null || (policy.scope !== undefined && (policy.scope.allowed.length > 0 || policy.scope.blocked.length > 0));

/**
 * A file tool's path checked before it runs: no tool may touch a path the scope blocks; writes
 * must pass the whole policy. Returns the error the model sees, or null.
 */
export function fileAccessViolation(policy: WritePolicy, tool: string, input: Record<string, unknown>): string | null {
  if (!PATH_TOOLS.has(tool) || typeof input.path !== 'string') return null;
  const p = normalPath(input.path);
  if (outOfWorkspace(p)) return null; // the file tools refuse these themselves, saying why
  return WRITES.has(tool) ? writeRefusal(policy, p) : blockedRefusal(policy, p);
}

/**
 * A person's edit of a file tool's input, checked as the run would check it, so an approval
 * with an edit that could never run is refused at once (a 400 naming the path) instead of being
 * recorded and failing in the sandbox, the request used up. A path out of the workspace included.
 */
export function editRefusal(policy: WritePolicy, tool: string, input: Record<string, unknown>): string | null {
  if (!PATH_TOOLS.has(tool) || typeof input.path !== 'string') return null;
  if (outOfWorkspace(normalPath(input.path))) return `'${input.path}' is not in the workspace (a path relative to it, without '..')`;
  return fileAccessViolation(policy, tool, input);
}

/** A normalised path out of the workspace: `..` first, or absolute. (`..notes.md` is a name in it.) */
const outOfWorkspace = (p: string): boolean => p === '..' || p.startsWith('../') || p.startsWith('/');

/** The scope's `blocked` globs: no file tool may touch such a path, not even to read it. */
function blockedRefusal(policy: WritePolicy, p: string): string | null {
  const blocked = policy.scope?.blocked ?? [];
  return matches(p, blocked) ? `'${p}' is outside this agent's file scope (blocked: ${blocked.join(', ')})` : null;
}
