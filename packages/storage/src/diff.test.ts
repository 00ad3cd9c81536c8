import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parsePatch } from 'diff';
import { describe, expect, test } from 'vitest';
import { diffWorkspaces } from './diff.ts';

const tree = (files: Record<string, string | Buffer>): Map<string, Buffer> => new Map(Object.entries(files).map(([p, c]) => [p, Buffer.isBuffer(c) ? c : Buffer.from(c)]));

/** git's blob id of some bytes, as `git hash-object` gives it. */
const blob = (b: Buffer): string => execFileSync('git', ['hash-object', '--stdin'], { input: b }).toString().trim();

describe('diffWorkspaces', () => {
  test('added, modified, deleted and unchanged files as a git-style unified diff', () => {
    const before = tree({ 'src/app.ts': 'a\nb\nc\nd\ne\nf\ng\nh\n', 'old.txt': 'gone\nsoon\n', 'same.md': '# same\n' });
    const after = tree({ 'src/app.ts': 'a\nb\nc\nD\ne\nf\ng\nh\n', 'new.txt': 'hello\n', 'same.md': '# same\n' });
    const { files, patch } = diffWorkspaces(before, after);
    expect(files).toEqual([
      { path: 'new.txt', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' },
      { path: 'old.txt', status: 'deleted', additions: 0, deletions: 2, binary: false, oldMode: '100644', newMode: null },
      { path: 'src/app.ts', status: 'modified', additions: 1, deletions: 1, binary: false, oldMode: '100644', newMode: '100644' },
    ]);
    expect(patch).toBe(
      [
        'diff --git a/new.txt b/new.txt',
        'new file mode 100644',
        '--- /dev/null',
        '+++ b/new.txt',
        '@@ -0,0 +1,1 @@',
        '+hello',
        'diff --git a/old.txt b/old.txt',
        'deleted file mode 100644',
        '--- a/old.txt',
        '+++ /dev/null',
        '@@ -1,2 +0,0 @@',
        '-gone',
        '-soon',
        'diff --git a/src/app.ts b/src/app.ts',
        '--- a/src/app.ts',
        '+++ b/src/app.ts',
        '@@ -1,7 +1,7 @@',
        ' a',
        ' b',
        ' c',
        '-d',
        '+D',
        ' e',
        ' f',
        ' g',
        '',
      ].join('\n'),
    );
    // What we write, a unified-diff parser reads back as the same changes.
    const parsed = parsePatch(patch);
    expect(parsed.map((p) => [p.oldFileName, p.newFileName, p.isCreate ?? false, p.isDelete ?? false])).toEqual([
      ['/dev/null', 'b/new.txt', true, false],
      ['a/old.txt', '/dev/null', false, true],
      ['a/src/app.ts', 'b/src/app.ts', false, false],
    ]);
  });

  test('binary files (a NUL byte, or not UTF-8) say "Binary files … differ" after git\'s index line of both blobs, and count no lines', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00]);
    const { files, patch } = diffWorkspaces(tree({ 'logo.png': png, 'latin1.txt': Buffer.from([0x63, 0x61, 0x66, 0xe9]) }), tree({ 'logo.png': Buffer.concat([png, Buffer.from([1])]), 'new.bin': Buffer.from([0, 1, 2]) }));
    expect(files).toEqual([
      { path: 'latin1.txt', status: 'deleted', additions: 0, deletions: 0, binary: true, oldMode: '100644', newMode: null },
      { path: 'logo.png', status: 'modified', additions: 0, deletions: 0, binary: true, oldMode: '100644', newMode: '100644' },
      { path: 'new.bin', status: 'added', additions: 0, deletions: 0, binary: true, oldMode: null, newMode: '100644' },
    ]);
    expect(patch).toBe(
      [
        'diff --git a/latin1.txt b/latin1.txt',
        'deleted file mode 100644',
        `index ${blob(Buffer.from([0x63, 0x61, 0x66, 0xe9]))}..${'0'.repeat(40)}`,
        'Binary files a/latin1.txt and /dev/null differ',
        'diff --git a/logo.png b/logo.png',
        `index ${blob(png)}..${blob(Buffer.concat([png, Buffer.from([1])]))} 100644`,
        'Binary files a/logo.png and b/logo.png differ',
        'diff --git a/new.bin b/new.bin',
        'new file mode 100644',
        `index ${'0'.repeat(40)}..${blob(Buffer.from([0, 1, 2]))}`,
        'Binary files /dev/null and b/new.bin differ',
        '',
      ].join('\n'),
    );
  });

  test('git apply takes a patch with a binary file in it: the binary file refused by name, the rest applied with --exclude (without the index line git refused the whole patch)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-diff-'));
    try {
      const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd: dir, stdio: 'pipe' }).toString();
      git('init', '-q');
      writeFileSync(path.join(dir, 't.txt'), 'a\n');
      writeFileSync(path.join(dir, 'b.bin'), Buffer.from([0, 1]));
      git('add', '.');
      git('commit', '-qm', 'i');
      const { patch } = diffWorkspaces(tree({ 't.txt': 'a\n', 'b.bin': Buffer.from([0, 1]) }), tree({ 't.txt': 'a\nb\n', 'b.bin': Buffer.from([0, 2]) }));
      writeFileSync(path.join(dir, 'change.patch'), patch);
      expect(() => git('apply', '--check', 'change.patch')).toThrow(/missing binary patch data for 'b\.bin'/);
      git('apply', '--exclude=b.bin', 'change.patch');
      expect(readFileSync(path.join(dir, 't.txt'), 'utf8')).toBe('a\nb\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('nothing changed → no files and an empty patch; an empty file added has a header and no hunk', () => {
    expect(diffWorkspaces(tree({ a: 'x' }), tree({ a: 'x' }))).toEqual({ files: [], patch: '' });
    expect(diffWorkspaces(new Map(), new Map())).toEqual({ files: [], patch: '' });
    expect(diffWorkspaces(new Map(), tree({ 'empty.txt': '' }))).toEqual({
      files: [{ path: 'empty.txt', status: 'added', additions: 0, deletions: 0, binary: false, oldMode: null, newMode: '100644' }],
      patch: 'diff --git a/empty.txt b/empty.txt\nnew file mode 100644\n',
    });
  });

  test('a missing final newline is marked; a name with special characters is quoted', () => {
    const { patch } = diffWorkspaces(tree({ 'a b\t.txt': 'one' }), tree({ 'a b\t.txt': 'two' }));
    // A tab after a name with a space, as git writes it (checked against git diff).
    expect(patch).toBe(['diff --git "a/a b\\t.txt" "b/a b\\t.txt"', '--- "a/a b\\t.txt"\t', '+++ "b/a b\\t.txt"\t', '@@ -1,1 +1,1 @@', '-one', '\\ No newline at end of file', '+two', '\\ No newline at end of file', ''].join('\n'));
  });

  test('modes: a chmod alone is a change (old mode / new mode, no hunk); a new or deleted executable says 100755; a mode git does not keep (0600) is no change', () => {
    const before = tree({ 'run.sh': 'echo\n', 'old.sh': 'x\n', 'both.sh': 'a\n', 'private.txt': 'p\n' });
    const after = tree({ 'run.sh': 'echo\n', 'new.sh': 'y\n', 'both.sh': 'b\n', 'private.txt': 'p\n' });
    const { files, patch } = diffWorkspaces(before, after, {
      before: new Map([['run.sh', 0o644], ['old.sh', 0o755], ['both.sh', 0o755], ['private.txt', 0o644]]),
      after: new Map([['run.sh', 0o755], ['new.sh', 0o755], ['both.sh', 0o644], ['private.txt', 0o600]]),
    });
    expect(files.map((f) => [f.path, f.status, f.additions, f.deletions])).toEqual([['both.sh', 'modified', 1, 1], ['new.sh', 'added', 1, 0], ['old.sh', 'deleted', 0, 1], ['run.sh', 'modified', 0, 0]]);
    expect(patch).toContain('diff --git a/both.sh b/both.sh\nold mode 100755\nnew mode 100644\n--- a/both.sh\n');
    expect(patch).toContain('diff --git a/new.sh b/new.sh\nnew file mode 100755\n');
    expect(patch).toContain('diff --git a/old.sh b/old.sh\ndeleted file mode 100755\n');
    expect(patch.endsWith('diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n')).toBe(true);
  });

  test('git apply and GNU patch -p1 both make the changed tree from the patch: modes, deletions and names with spaces', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-diff-'));
    try {
      const sh = (cmd: string, args: string[], cwd: string, input?: string) => execFileSync(cmd, args, { cwd, stdio: 'pipe', ...(input !== undefined ? { input } : {}) }).toString();
      const before = { 'my notes.txt': 'a\n', 'gone.sh': 'x\n', 'run.sh': 'echo\n', 'new dir/keep.txt': 'k\n' };
      const after = { 'my notes.txt': 'a\nb\n', 'new dir/with space.txt': 'n\n', 'run.sh': 'echo\n', 'new dir/keep.txt': 'k\n' };
      const modesBefore = new Map([['gone.sh', 0o755]]);
      const modesAfter = new Map([['run.sh', 0o755]]);
      const { patch } = diffWorkspaces(tree(before), tree(after), { before: modesBefore, after: modesAfter });
      for (const tool of ['git', 'patch'] as const) {
        const root = path.join(dir, tool);
        for (const [p, c] of Object.entries(before)) {
          execFileSync('mkdir', ['-p', path.dirname(path.join(root, p))]);
          writeFileSync(path.join(root, p), c, { mode: modesBefore.get(p) ?? 0o644 });
        }
        if (tool === 'git') sh('git', ['apply', '-'], root, patch);
        else sh('patch', ['-p1', '-s'], root, patch);
        const listing = sh('find', ['.', '-type', 'f', '-printf', '%P %m\n'], root).trim().split('\n').sort();
        expect([tool, listing]).toEqual([tool, ['my notes.txt 644', 'new dir/keep.txt 644', 'new dir/with space.txt 644', 'run.sh 755']]);
        expect(readFileSync(path.join(root, 'my notes.txt'), 'utf8')).toBe('a\nb\n');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a file rewritten past the edit limit is shown as every old line removed and every new line added', () => {
    const old = Array.from({ length: 3000 }, (_, i) => `old ${i}`).join('\n') + '\n';
    const now = Array.from({ length: 3000 }, (_, i) => `new ${i}`).join('\n') + '\n';
    const { files, patch } = diffWorkspaces(tree({ big: old }), tree({ big: now }));
    expect(files).toEqual([{ path: 'big', status: 'modified', additions: 3000, deletions: 3000, binary: false, oldMode: '100644', newMode: '100644' }]);
    const [p] = parsePatch(patch);
    expect(p?.hunks).toHaveLength(1);
    expect(p?.hunks[0]).toMatchObject({ oldStart: 1, oldLines: 3000, newStart: 1, newLines: 3000 });
  });
});
