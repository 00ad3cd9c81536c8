import type { TaskChangeView, TaskView } from '@baton/api';

export type ChangedFile = TaskChangeView['files'][number];

/**
 * The patch cut into its files: the gateway writes one `diff --git` section per changed file, in
 * the order of `files`, so the n-th section is the n-th file's. A section that cannot be matched
 * (a patch not as documented) is kept under the file it follows rather than dropped. Pure.
 */
export function fileSections(change: TaskChangeView): { file: ChangedFile; lines: string[] }[] {
  if (change.patch === '' || change.files.length === 0) return [];
  const sections: string[][] = [];
  for (const line of change.patch.replace(/\n$/, '').split('\n')) {
    const last = sections.at(-1);
    if (line.startsWith('diff --git ') || !last) sections.push([line]);
    else last.push(line);
  }
  const lastFile = change.files.length - 1;
  return change.files.map((file, i) => ({ file, lines: i === lastFile ? sections.slice(i).flat() : (sections[i] ?? []) }));
}

/** How a line of a patch is shown: added, removed, a hunk's header, or context. */
export const lineKind = (l: string): 'add' | 'del' | 'hunk' | '' =>
  l.startsWith('+') && !l.startsWith('+++') ? 'add' : l.startsWith('-') && !l.startsWith('---') ? 'del' : l.startsWith('@@') ? 'hunk' : '';

/**
 * One line per file for its heading: `added · +12 −0`, `modified · +3 −1`, `binary, added`, and
 * what became of its mode — `mode 100644 → 100755` (a chmod alone reads `+0 −0` otherwise),
 * `executable` for a new or deleted executable.
 */
export const fileStat = (f: ChangedFile): string => {
  const mode = f.oldMode && f.newMode ? (f.oldMode !== f.newMode ? ` · mode ${f.oldMode} → ${f.newMode}` : '') : (f.newMode ?? f.oldMode) === '100755' ? ' · executable' : '';
  return `${f.binary ? `binary, ${f.status}` : `${f.status} · +${f.additions} −${f.deletions}`}${mode}`;
};

/** The whole change in a few words: `3 files · +40 −2`. */
export function changeTotals(change: TaskChangeView): string {
  const add = change.files.reduce((n, f) => n + f.additions, 0);
  const del = change.files.reduce((n, f) => n + f.deletions, 0);
  return `${change.files.length} ${change.files.length === 1 ? 'file' : 'files'} · +${add} −${del}`;
}

/**
 * What the change depends on: the input workspace and the recorded files laid over it. The page
 * reads the change again only when this moves — not on every event of a running task.
 */
export const changeKey = (task: Pick<TaskView, 'workspace' | 'artifacts' | 'deletedFiles'>): string =>
  JSON.stringify([task.workspace, task.artifacts.map((a) => [a.path, a.sha256]), task.deletedFiles]);

/** Files shown unfolded: all of a small change; a big one opens folded, each file a click away. */
export const UNFOLDED_FILES = 6;
