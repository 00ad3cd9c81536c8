import path from 'node:path';
import { z } from 'zod';
import { oneLine } from './text.ts';

/**
 * A lead's plan: subtasks that form a DAG (`dependsOn`), each owned by one agent type and
 * bounded by file locks (globs: the only paths its agent may create, change or delete).
 * Pure checks here; which agent types exist is the caller's knowledge (the team).
 */

/** A subtask's id, which is also its agent's id: a name in bus subjects, URLs and the workspace's paths. */
export const SubtaskId = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, 'lowercase letters, digits, - and _, starting with a letter or digit (at most 40)');
/** Agent ids the runtime gives to reviewers and rework rounds: a subtask may not take them. */
const RESERVED_ID_RE = /^(lead|review-\d+)$|-fix\d+$/;

export const ReviewSeverity = z.enum(['critical', 'major', 'minor', 'info']);
export const ReviewIssue = z.object({
  severity: ReviewSeverity,
  /** The file the issue is in (null: about the change as a whole). */
  file: z.string().min(1).max(1024).nullable(),
  line: z.number().int().positive().nullable(),
  message: z.string().min(1).max(4000),
});
export type ReviewIssue = z.infer<typeof ReviewIssue>;
export const ReviewVerdict = z.enum(['approve', 'request_changes']);
export type ReviewVerdict = z.infer<typeof ReviewVerdict>;

export const PlanSubtask = z.object({
  id: SubtaskId,
  agent: z.string().min(1).max(100),
  description: z.string().min(1).max(8000),
  fileLocks: z.array(z.string().min(1).max(300)).max(100),
  dependsOn: z.array(z.string().min(1).max(40)).max(50),
});
export type PlanSubtask = z.infer<typeof PlanSubtask>;

export interface PlanProblem {
  /** Where in the plan, e.g. `subtasks.1.depends_on.0`. */
  path: string;
  message: string;
}

/**
 * Everything wrong with a plan, each problem naming where: duplicate or reserved ids, unknown
 * agents (when `agents` is given), unknown or self dependencies, cycles, and two subtasks that
 * lock the same file while able to run at the same time (neither depends on the other).
 * Field names in paths are the model-facing ones (snake_case).
 */
export function planProblems(subtasks: readonly PlanSubtask[], agents: readonly string[] | null): PlanProblem[] {
  const problems: PlanProblem[] = [];
  if (subtasks.length === 0) problems.push({ path: 'subtasks', message: 'a plan needs at least one subtask' });
  const index = new Map<string, number>();
  subtasks.forEach((t, i) => {
    if (index.has(t.id)) problems.push({ path: `subtasks.${i}.id`, message: `duplicate subtask id '${t.id}' (also subtasks.${index.get(t.id)})` });
    else index.set(t.id, i);
    if (RESERVED_ID_RE.test(t.id)) problems.push({ path: `subtasks.${i}.id`, message: `'${t.id}' is reserved (lead, review-<n> and <id>-fix<n> name the runtime's own agents)` });
    if (agents && !agents.includes(t.agent)) problems.push({ path: `subtasks.${i}.agent`, message: `unknown agent '${t.agent}'; this team's engineers: ${agents.join(', ') || 'none'}` });
    if (t.fileLocks.length === 0) problems.push({ path: `subtasks.${i}.file_locks`, message: 'a subtask needs at least one file lock (the paths its agent may change)' });
    t.fileLocks.forEach((g, j) => {
      const bad = lockProblem(g) ?? (t.fileLocks.indexOf(g) < j ? `'${g}' is named twice (also file_locks.${t.fileLocks.indexOf(g)})` : null);
      if (bad) problems.push({ path: `subtasks.${i}.file_locks.${j}`, message: bad });
    });
  });
  subtasks.forEach((t, i) =>
    t.dependsOn.forEach((d, j) => {
      if (d === t.id) problems.push({ path: `subtasks.${i}.depends_on.${j}`, message: `subtask '${t.id}' depends on itself` });
      else if (t.dependsOn.indexOf(d) < j) problems.push({ path: `subtasks.${i}.depends_on.${j}`, message: `'${d}' is named twice (also depends_on.${t.dependsOn.indexOf(d)})` });
      else if (!index.has(d)) problems.push({ path: `subtasks.${i}.depends_on.${j}`, message: `unknown subtask '${d}'; subtasks: ${[...index.keys()].join(', ')}` });
    }),
  );
  const cycles = findCycles(subtasks);
  for (const cycle of cycles) problems.push({ path: 'subtasks', message: `dependency cycle: ${cycle.join(' → ')}` });
  if (cycles.length === 0 && !subtasks.some((t) => t.dependsOn.includes(t.id))) {
    const before = ancestors(subtasks);
    for (let i = 0; i < subtasks.length; i++) {
      for (let j = i + 1; j < subtasks.length; j++) {
        const a = subtasks[i] as PlanSubtask;
        const b = subtasks[j] as PlanSubtask;
        if (before.get(a.id)?.has(b.id) || before.get(b.id)?.has(a.id)) continue; // ordered: never at the same time
        const clash = overlappingLocks(a.fileLocks, b.fileLocks);
        if (clash) {
          problems.push({
            path: `subtasks.${j}.file_locks`,
            message: `'${b.id}' and '${a.id}' can run at the same time and both lock ${clash[0] === clash[1] ? `'${clash[0]}'` : `'${clash[1]}' / '${clash[0]}'`}; make one depend on the other or split the files`,
          });
        }
      }
    }
  }
  return problems;
}

/**
 * A path with a `.git` segment: version control's own state — spelt as any file system takes it
 * for `.git`: in any case ('.GIT' on macOS and Windows), with joiners macOS ignores
 * ('.g\u200cit'), with the trailing dots and spaces Windows drops ('.git.', '.git ').
 */
export const insideGit = (p: string): boolean => p.split('/').some((s) => s.toLowerCase().replace(/[\u200c\u200d]/g, '').replace(/[. ]+$/, '') === '.git');

/** A workspace path as one spelling (`./a//b` → `a/b`): how tool paths are checked and recorded, and how locks must be written. */
export const normalPath = (p: string): string => path.posix.normalize(p.replace(/\\/g, '/')).replace(/^\.\//, '');

function lockProblem(glob: string): string | null {
  if (glob.includes('\0')) return 'contains a NUL byte';
  if ([...glob].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) return `'${oneLine(glob, 80)}' contains a control character (a newline, a tab)`;
  // Extended globs (!(x), +(x), @(x), *(x), ?(x)) are matched where tools are checked but not
  // where locks are compared: two subtasks could hold one file at once. Not taken.
  const ext = /[!+@*?]\(/.exec(glob);
  if (ext) return `'${glob}' uses an extended glob ('${ext[0]}…)'), which locks do not take; use *, **, ?, [abc] or {a,b}`;
  if (glob.startsWith('/')) return `'${glob}' is absolute; locks are relative to the workspace`;
  if (glob.split('/').some((p) => p === '..')) return `'${glob}' contains '..'`;
  // Version control's own state, not the project (the runner refuses writes there whatever a lock says).
  if (insideGit(glob)) return `'${glob}' is inside .git (version control's own state, not the project); lock the project's files`;
  // Locks are compared with each other and with the paths tools are given as written: one
  // spelling per path, or 'a//b' and 'a/b' would be two locks on one file.
  if (glob.endsWith('/')) return `'${glob}' ends in '/'; lock a directory's files with '${glob}**'`;
  if (glob === '.') return `'.' locks the whole workspace; lock the files this subtask changes`;
  if (normalPath(glob) !== glob) return `'${glob}' is not written as a plain relative path: write '${normalPath(glob)}'`;
  // Nothing but wildcards ('**', '**/**', '*/*'): files anywhere, whichever subtask's they are.
  const segments = glob.split('/');
  if (segments.every((s) => /^\*+$/.test(s))) {
    if (segments.some((s) => s.length > 1)) return `'${glob}' locks the whole workspace; lock the files this subtask changes`;
    return `'${glob}' locks every file ${segments.length === 1 ? 'at the top of the workspace' : `${segments.length} directories down`}, whichever subtask changes them; lock the files this subtask changes`;
  }
  return null;
}

/**
 * One cycle per knot of the dependencies (each set of subtasks that all wait on each other, in
 * plan order), ids in order with the first repeated at the end: a plan with two separate cycles
 * has both named at once, so one correction can mend both.
 */
function findCycles(subtasks: readonly PlanSubtask[]): string[][] {
  // A subtask that waits on itself is named as such (its depends_on), not as a cycle besides.
  const deps = new Map(subtasks.map((t) => [t.id, t.dependsOn.filter((d) => d !== t.id && subtasks.some((u) => u.id === d))]));
  // The knots: Tarjan's strongly connected components of more than one subtask.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const knots: Set<string>[] = [];
  const connect = (id: string): void => {
    index.set(id, index.size);
    low.set(id, index.get(id)!);
    stack.push(id);
    for (const d of deps.get(id)!) {
      if (!index.has(d)) connect(d);
      if (stack.includes(d)) low.set(id, Math.min(low.get(id)!, low.get(d)!));
    }
    if (low.get(id) !== index.get(id)) return;
    const knot = new Set(stack.splice(stack.indexOf(id)));
    if (knot.size > 1) knots.push(knot);
  };
  for (const t of subtasks) if (!index.has(t.id)) connect(t.id);
  // In each knot, the shortest way from its first subtask (in plan order) back to it.
  const first = (knot: Set<string>): number => subtasks.findIndex((t) => knot.has(t.id));
  return knots
    .sort((a, b) => first(a) - first(b))
    .map((knot) => {
      const start = subtasks[first(knot)]!.id;
      const via = new Map<string, string>();
      const queue = [start];
      for (const id of queue) {
        for (const d of deps.get(id)!) {
          if (d === start) {
            const back = [id];
            while (back[0] !== start) back.unshift(via.get(back[0]!)!);
            return [...back, start];
          }
          if (knot.has(d) && !via.has(d)) {
            via.set(d, id);
            queue.push(d);
          }
        }
      }
      return [start, start]; // unreachable: every subtask of a knot leads back to each other one
    });
}

/** For each subtask, every subtask it (transitively) depends on. Assumes no cycle. */
export function ancestors(subtasks: readonly Pick<PlanSubtask, 'id' | 'dependsOn'>[]): Map<string, Set<string>> {
  const deps = new Map(subtasks.map((t) => [t.id, t.dependsOn]));
  const memo = new Map<string, Set<string>>();
  const of = (id: string): Set<string> => {
    const hit = memo.get(id);
    if (hit) return hit;
    const out = new Set<string>();
    memo.set(id, out);
    for (const d of deps.get(id) ?? []) {
      if (!deps.has(d)) continue;
      out.add(d);
      for (const x of of(d)) out.add(x);
    }
    return out;
  };
  for (const t of subtasks) of(t.id);
  return memo;
}

const WILDCARD = /[*?[{]/;
/** A lock with a wildcard (a glob), not one plain path. */
export const isGlob = (lock: string): boolean => WILDCARD.test(lock);
const staticPrefix = (g: string): string => {
  const i = g.search(WILDCARD);
  return i < 0 ? g : g.slice(0, i);
};
const staticSuffix = (g: string): string => {
  const rest = g.slice(g.search(WILDCARD) + 1);
  const m = /[^*?\]}]*$/.exec(rest);
  return m ? m[0] : '';
};

/**
 * Whether two lock globs may name a common path. Exact when either is a plain path; for two
 * globs it is conservative (a shared static prefix and compatible fixed endings count as an
 * overlap), so it may refuse a plan that would have been safe, never allow an unsafe one.
 */
export function globsOverlap(a: string, b: string): boolean {
  if (a === b) return true;
  const aw = isGlob(a);
  const bw = isGlob(b);
  if (!aw && !bw) return false;
  if (!aw) return path.posix.matchesGlob(a, b);
  if (!bw) return path.posix.matchesGlob(b, a);
  const pa = staticPrefix(a);
  const pb = staticPrefix(b);
  if (!pa.startsWith(pb) && !pb.startsWith(pa)) return false;
  const sa = staticSuffix(a);
  const sb = staticSuffix(b);
  return sa.endsWith(sb) || sb.endsWith(sa);
}

/** The first pair of overlapping locks of two subtasks, or null. */
export function overlappingLocks(a: readonly string[], b: readonly string[]): [string, string] | null {
  for (const x of a) for (const y of b) if (globsOverlap(x, y)) return [x, y];
  return null;
}

/** Whether a workspace path is inside a set of locks. */
export const withinLocks = (p: string, locks: readonly string[]): boolean => locks.some((g) => g === p || path.posix.matchesGlob(p, g));

/** Does this review start a round of changes: it asks for changes and the plan has a round left? Pure. */
export const startsRoundOfChanges = (plan: { round: number; maxReviewRounds: number }, verdict: ReviewVerdict): boolean => verdict === 'request_changes' && plan.round < plan.maxReviewRounds;

/**
 * Who addresses each issue of a review asking for changes (indexes into `issues`, by subtask, in
 * plan order). An issue about a file goes to the one subtask that owns it: of the subtasks whose
 * locks hold the file, those that changed it — else all of them — and of those the last to run
 * (the one the others come before: subtasks whose locks overlap are ordered by their
 * dependencies). Two owners fixing one issue made the same change twice. An issue about no file,
 * or a file no lock holds, goes to every subtask that changed files (every subtask if none did).
 * Pure.
 */
export function reworkFor(subtasks: readonly ReworkSubtask[], issues: readonly Pick<ReviewIssue, 'file'>[]): Rework {
  const before = ancestors(subtasks);
  return route(subtasks, issues, (file) => {
    const holders = subtasks.filter((t) => withinLocks(file, t.fileLocks));
    const changers = holders.filter((t) => t.filesCreated.includes(file) || t.filesModified.includes(file));
    const candidates = changers.length > 0 ? changers : holders;
    // The last to run: no other candidate comes after it.
    return candidates.filter((t) => !candidates.some((o) => o !== t && before.get(o.id)?.has(t.id)));
  });
}

/** How reviews recorded before `reworkFor` (no `rework` in them) are folded: each issue to every subtask whose locks hold its file. Pure. */
export const reworkByLocks = (subtasks: readonly ReworkSubtask[], issues: readonly Pick<ReviewIssue, 'file'>[]): Rework =>
  route(subtasks, issues, (file) => subtasks.filter((t) => withinLocks(file, t.fileLocks)));

type ReworkSubtask = Pick<PlanSubtask, 'id' | 'dependsOn' | 'fileLocks'> & { filesCreated: readonly string[]; filesModified: readonly string[] };
/** Issues (indexes into the review's) by subtask, in plan order. */
export type Rework = { subtaskId: string; issues: number[] }[];

/** Each issue to the owners `ownersOf` names for its file; an issue about no file, or a file nobody owns, to every subtask that changed files (every subtask if none did). */
function route(subtasks: readonly ReworkSubtask[], issues: readonly Pick<ReviewIssue, 'file'>[], ownersOf: (file: string) => readonly ReworkSubtask[]): Rework {
  const changedFiles = subtasks.filter((t) => t.filesCreated.length + t.filesModified.length > 0);
  const general = changedFiles.length > 0 ? changedFiles : subtasks;
  const out = new Map<string, number[]>();
  issues.forEach((issue, i) => {
    const owners = issue.file ? ownersOf(issue.file) : [];
    for (const t of owners.length > 0 ? owners : general) out.set(t.id, [...(out.get(t.id) ?? []), i]);
  });
  return subtasks.filter((t) => out.has(t.id)).map((t) => ({ subtaskId: t.id, issues: out.get(t.id) ?? [] }));
}
