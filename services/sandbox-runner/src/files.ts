import path from 'node:path';

/** Tools that may change the workspace: after them it is synced before their results are recorded. */
export const MUTATING_TOOLS: ReadonlySet<string> = new Set(['write_file', 'edit_file', 'run_command', 'run_tests']);
const WRITES: ReadonlySet<string> = new Set(['write_file', 'edit_file']);
const PATH_TOOLS: ReadonlySet<string> = new Set(['write_file', 'edit_file', 'read_file', 'list_directory']);

/** A tool's path argument as one spelling (`./a//b` → `a/b`), as recorded in results and checked against scopes. */
export const normalPath = (p: string): string => path.posix.normalize(p.replace(/\\/g, '/')).replace(/^\.\//, '');

const matches = (p: string, globs: readonly string[]): boolean => globs.some((g) => path.posix.matchesGlob(p, g));

/**
 * An agent's file scope (config `file_scope`): no file tool may touch a path matching a
 * blocked glob; writes must match an allowed glob when any is given. Returns the error the
 * model sees, or null.
 */
export function fileScopeViolation(scope: { allowed: string[]; blocked: string[] } | undefined, tool: string, input: Record<string, unknown>): string | null {
  if (!scope || !PATH_TOOLS.has(tool) || typeof input.path !== 'string') return null;
  const p = normalPath(input.path);
  if (p.startsWith('..') || p.startsWith('/')) return null; // the file tools refuse these themselves, saying why
  if (matches(p, scope.blocked)) return `'${p}' is outside this agent's file scope (blocked: ${scope.blocked.join(', ')})`;
  if (WRITES.has(tool) && scope.allowed.length > 0 && !matches(p, scope.allowed)) return `'${p}' is outside this agent's file scope (writes allowed: ${scope.allowed.join(', ')})`;
  return null;
}
