import { createHash } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { looksBinary } from '@baton/domain';
import { FILE_HEADERS_ONLY, formatPatch, structuredPatch, type StructuredPatch, type StructuredPatchHunk } from 'diff';

export interface FileChange {
  path: string;
  status: 'added' | 'modified' | 'deleted';
  /** Lines added / removed (0 for binary files). */
  additions: number;
  deletions: number;
  binary: boolean;
  /** Git's mode of each side: `100644`, or `100755` for an executable; null for a side that does not exist. */
  oldMode: GitMode | null;
  newMode: GitMode | null;
}

export type GitMode = '100644' | '100755';

export interface WorkspaceDiff {
  /** Changed files, sorted by path. */
  files: FileChange[];
  /** A git-style unified diff of every change ('' when nothing changed). */
  patch: string;
}

/** Lines of context around each change, as git's default. */
const CONTEXT = 3;
/**
 * The line diff's cost is about (old lines + new lines) × edit distance. Past an edit distance
 * of min(2000, EDIT_BUDGET / lines) a file is shown as rewritten whole instead: that bounds the
 * time per file (a fraction of a second) and, unlike a timeout, gives the same patch on every
 * machine.
 */
const MAX_EDIT_LENGTH = 2_000;
const EDIT_BUDGET = 2_000_000;
const lineCount = (s: string): number => {
  let n = 1;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
  return n;
};

/** A file's git blob id (SHA-1 of `blob <size>\\0<bytes>`); forty zeros for a side that does not exist. */
const gitBlobId = (b: Buffer | undefined): string => (b === undefined ? '0'.repeat(40) : createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex'));

/** Text is UTF-8 with no NUL byte in its first 8000 bytes (git's test for binary, plus UTF-8). */
const isText = (b: Buffer): boolean => !looksBinary(b) && isUtf8(b);

/** Git's mode for a regular file: it keeps only whether the owner may execute it. */
const gitMode = (mode: number): GitMode => ((mode & 0o100) !== 0 ? '100755' : '100644');

/**
 * What changed from `before` to `after` (path → bytes), as a git-style unified diff: for each
 * changed path a `diff --git a/<path> b/<path>` header, `new file mode` / `deleted file mode` for
 * added and deleted files, `old mode` / `new mode` where a file's mode changed (git's: executable
 * or not; `modes`, path → permission bits, 0644 where absent), `--- a/<path>` / `+++ b/<path>`
 * (`/dev/null` for the missing side; a tab after a name with a space, as git writes it, so
 * `patch` reads the name whole) and hunks with 3 lines of context; binary files (NUL bytes or not
 * UTF-8) get a `Binary files … differ` line instead of hunks. Pure.
 */
export function diffWorkspaces(before: ReadonlyMap<string, Buffer>, after: ReadonlyMap<string, Buffer>, modes: { before?: ReadonlyMap<string, number>; after?: ReadonlyMap<string, number> } = {}): WorkspaceDiff {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const files: FileChange[] = [];
  let patch = '';
  for (const p of paths) {
    const old = before.get(p);
    const now = after.get(p);
    const oldMode = old === undefined ? undefined : gitMode(modes.before?.get(p) ?? 0o644);
    const newMode = now === undefined ? undefined : gitMode(modes.after?.get(p) ?? 0o644);
    const sameBytes = old !== undefined && now !== undefined && old.equals(now);
    if (sameBytes && oldMode === newMode) continue;
    const status: FileChange['status'] = old === undefined ? 'added' : now === undefined ? 'deleted' : 'modified';
    const oldName = old === undefined ? '/dev/null' : `a/${p}`;
    const newName = now === undefined ? '/dev/null' : `b/${p}`;
    const sides = { oldMode: oldMode ?? null, newMode: newMode ?? null };
    const git = { isGit: true, isCreate: status === 'added', isDelete: status === 'deleted', oldMode, newMode: status === 'modified' && oldMode === newMode ? undefined : newMode } as const;
    if (sameBytes) {
      // The mode alone: git's header and its two mode lines, nothing else.
      patch += formatPatch({ oldFileName: oldName, newFileName: newName, oldHeader: undefined, newHeader: undefined, hunks: [], ...git });
      files.push({ path: p, status, additions: 0, deletions: 0, binary: !isText(now), ...sides });
      continue;
    }
    const binary = (old !== undefined && !isText(old)) || (now !== undefined && !isText(now));
    if (binary) {
      const header = formatPatch({ oldFileName: oldName, newFileName: newName, oldHeader: undefined, newHeader: undefined, hunks: [], ...git });
      // git's own form: an `index` line of both blobs (full hashes) before the line — without it
      // `git apply` refused the whole patch ("bad git-diff"), text files too, --exclude or not.
      // The mode is on it when the file kept its own.
      const index = `index ${gitBlobId(old)}..${gitBlobId(now)}${status === 'modified' && oldMode === newMode ? ` ${oldMode}` : ''}\n`;
      patch += `${header}${index}Binary files ${quoted(oldName)} and ${quoted(newName)} differ\n`;
      files.push({ path: p, status, additions: 0, deletions: 0, binary: true, ...sides });
      continue;
    }
    const oldText = old?.toString('utf8') ?? '';
    const newText = now?.toString('utf8') ?? '';
    const hunks = lineHunks(oldName, newName, oldText, newText);
    let additions = 0;
    let deletions = 0;
    for (const h of hunks) {
      for (const line of h.lines) {
        if (line.startsWith('+')) additions++;
        else if (line.startsWith('-')) deletions++;
      }
    }
    patch += tabbed(formatPatch({ oldFileName: oldName, newFileName: newName, oldHeader: undefined, newHeader: undefined, hunks, ...git }), p, oldName, newName);
    files.push({ path: p, status, additions, deletions, binary: false, ...sides });
  }
  return { files, patch };
}

/**
 * A file's section with a tab after its `---` / `+++` names when the path has a space, as git
 * writes them: without it GNU patch takes the name to end at the space.
 */
function tabbed(section: string, p: string, oldName: string, newName: string): string {
  if (!p.includes(' ')) return section;
  const end = section.indexOf('\n@@') + 1; // the header's lines, each with its newline
  const head = end === 0 ? section : section.slice(0, end);
  const mark = (h: string, prefix: string, name: string): string => (name === '/dev/null' ? h : h.replace(`\n${prefix}${quoted(name)}\n`, `\n${prefix}${quoted(name)}\t\n`));
  return mark(mark(head, '--- ', oldName), '+++ ', newName) + (end === 0 ? '' : section.slice(end));
}

function lineHunks(oldName: string, newName: string, oldText: string, newText: string): StructuredPatchHunk[] {
  const maxEditLength = Math.max(1, Math.min(MAX_EDIT_LENGTH, Math.floor(EDIT_BUDGET / (lineCount(oldText) + lineCount(newText)))));
  const diffed: StructuredPatch | undefined = structuredPatch(oldName, newName, oldText, newText, undefined, undefined, { context: CONTEXT, maxEditLength });
  if (diffed) return diffed.hunks;
  // Too many edits: one hunk that removes every old line and adds every new one (each half is
  // a diff against empty, which costs nothing to compute).
  const removed = structuredPatch(oldName, newName, oldText, '', undefined, undefined, { context: 0 }).hunks[0];
  const added = structuredPatch(oldName, newName, '', newText, undefined, undefined, { context: 0 }).hunks[0];
  return [{ oldStart: 1, oldLines: removed?.oldLines ?? 0, newStart: 1, newLines: added?.newLines ?? 0, lines: [...(removed?.lines ?? []), ...(added?.lines ?? [])] }];
}

/** A file name as diff headers write it (C-quoted when it has special characters), by jsdiff's own rules. */
function quoted(name: string): string {
  const headers = formatPatch({ oldFileName: name, newFileName: name, oldHeader: undefined, newHeader: undefined, hunks: [] }, FILE_HEADERS_ONLY);
  return (headers.split('\n')[0] ?? `--- ${name}`).slice(4);
}
