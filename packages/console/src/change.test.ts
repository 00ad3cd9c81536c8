import { describe, expect, it } from 'vitest';
import { changeKey, changeTotals, fileSections, fileStat, lineKind } from '../ui/change.ts';

const patch = [
  'diff --git a/api/app.ts b/api/app.ts',
  '--- a/api/app.ts',
  '+++ b/api/app.ts',
  '@@ -1,2 +1,2 @@',
  ' keep',
  '-old',
  '+new',
  'diff --git a/logo.png b/logo.png',
  'new file mode 100644',
  'Binary files /dev/null and b/logo.png differ',
  'diff --git a/notes/diff.md b/notes/diff.md',
  'new file mode 100644',
  '--- /dev/null',
  '+++ b/notes/diff.md',
  '@@ -0,0 +1,2 @@',
  '+diff --git is how a patch starts',
  '+second',
  '',
].join('\n');
const change = {
  files: [
    { path: 'api/app.ts', status: 'modified' as const, additions: 1, deletions: 1, binary: false, oldMode: '100644' as const, newMode: '100644' as const },
    { path: 'logo.png', status: 'added' as const, additions: 0, deletions: 0, binary: true, oldMode: null, newMode: '100644' as const },
    { path: 'notes/diff.md', status: 'added' as const, additions: 2, deletions: 0, binary: false, oldMode: null, newMode: '100644' as const },
  ],
  patch,
};

describe("the console's change, file by file", () => {
  it('cuts the patch at each file header, in the order of the files — a changed line that reads like a header stays in its file', () => {
    const sections = fileSections(change);
    expect(sections.map((s) => [s.file.path, s.lines[0], s.lines.length])).toEqual([
      ['api/app.ts', 'diff --git a/api/app.ts b/api/app.ts', 7],
      ['logo.png', 'diff --git a/logo.png b/logo.png', 3],
      ['notes/diff.md', 'diff --git a/notes/diff.md b/notes/diff.md', 7],
    ]);
    expect(sections[2]?.lines.at(-2)).toBe('+diff --git is how a patch starts');
  });

  it('shows nothing for an empty change, and loses no line of a patch with more sections than files', () => {
    expect(fileSections({ files: [], patch: '' })).toEqual([]);
    const one = fileSections({ files: [change.files[0]!], patch });
    expect(one).toHaveLength(1);
    expect(one[0]?.lines).toHaveLength(patch.split('\n').length - 1);
  });

  it('names each file\'s change and the whole', () => {
    expect(change.files.map(fileStat)).toEqual(['modified · +1 −1', 'binary, added', 'added · +2 −0']);
    expect(changeTotals(change)).toBe('3 files · +3 −1');
    // A mode's change is said (a chmod alone read `modified · +0 −0`).
    const file = change.files[0]!;
    expect([
      { ...file, additions: 0, deletions: 0, newMode: '100755' as const },
      { ...file, status: 'added' as const, oldMode: null, newMode: '100755' as const },
      { ...file, status: 'deleted' as const, oldMode: '100755' as const, newMode: null, binary: true },
    ].map(fileStat)).toEqual(['modified · +0 −0 · mode 100644 → 100755', 'added · +1 −1 · executable', 'binary, deleted · executable']);
    expect(changeTotals({ files: [change.files[0]!], patch })).toBe('1 file · +1 −1');
    expect(['+a', '+++ b/x', '-a', '--- a/x', '@@ -1 +1 @@', ' a'].map(lineKind)).toEqual(['add', '', 'del', '', 'hunk', '']);
  });

  it('reads the change again only when the input, a recorded file or a deletion changes, not on every event', () => {
    const task = { workspace: null, artifacts: [{ path: 'a.ts', bytes: 3, sha256: 'x', mediaType: 'text/plain', agentId: 'e1' }], deletedFiles: [] };
    expect(changeKey(task)).toBe(changeKey({ ...task, artifacts: [...task.artifacts] }));
    expect(changeKey(task)).not.toBe(changeKey({ ...task, artifacts: [{ ...task.artifacts[0]!, sha256: 'y' }] }));
    expect(changeKey(task)).not.toBe(changeKey({ ...task, deletedFiles: ['old.ts'] }));
  });
});
