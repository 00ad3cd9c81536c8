import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { storeArtifact } from './artifacts.ts';
import { readWorkspace, storeWorkspace, taskChange, taskTree, workspaceDigest, workspaceManifest, type WorkspaceFile } from './workspaces.ts';

const file = (path: string, content: string | Buffer, mode = 0o644): WorkspaceFile => ({ path, mode, content: Buffer.isBuffer(content) ? content : Buffer.from(content) });

describe('input workspaces in Postgres', () => {
  test('store → read round trip (bytes, modes, order); the manifest has no contents; unknown digests are null', async ({ pg: { db } }) => {
    const files = [file('src/main.ts', 'export {};\n'), file('bin/run', '#!/bin/sh\n', 0o755), file('logo.png', Buffer.from([0, 1, 2, 255])), file('empty', '')];
    const stored = await storeWorkspace(db.pool, files);
    expect(stored).toEqual({ digest: workspaceDigest(files), files: 4, bytes: 11 + 10 + 4 });
    expect(await readWorkspace(db.pool, stored.digest)).toEqual([file('bin/run', '#!/bin/sh\n', 0o755), file('empty', ''), file('logo.png', Buffer.from([0, 1, 2, 255])), file('src/main.ts', 'export {};\n')]);
    expect(await workspaceManifest(db.pool, stored.digest)).toEqual([
      { path: 'bin/run', mode: 0o755, bytes: 10 },
      { path: 'empty', mode: 0o644, bytes: 0 },
      { path: 'logo.png', mode: 0o644, bytes: 4 },
      { path: 'src/main.ts', mode: 0o644, bytes: 11 },
    ]);
    const header = await db.pool.query('select files, bytes from input_workspaces where digest = $1', [stored.digest]);
    expect(header.rows).toEqual([{ files: 4, bytes: '25' }]);
    expect(await readWorkspace(db.pool, 'f'.repeat(64))).toBeNull();
    expect(await workspaceManifest(db.pool, 'f'.repeat(64))).toBeNull();
    // An empty workspace is a workspace too.
    const none = await storeWorkspace(db.pool, []);
    expect(await readWorkspace(db.pool, none.digest)).toEqual([]);
  });

  test('content-addressed: the same files again (in another order, or at once) are stored once', async ({ pg: { db } }) => {
    const a = [file('a.txt', 'A'), file('b.txt', 'B')];
    const [one, two] = await Promise.all([storeWorkspace(db.pool, a), storeWorkspace(db.pool, [...a].reverse())]);
    const three = await storeWorkspace(db.pool, a);
    expect(new Set([one.digest, two.digest, three.digest]).size).toBe(1);
    const counts = await db.pool.query('select (select count(*)::int from input_workspaces) as w, (select count(*)::int from input_workspace_files) as f');
    expect(counts.rows[0]).toEqual({ w: 1, f: 2 });
    await expect(storeWorkspace(db.pool, [file('x', '1'), file('x', '2')])).rejects.toThrow(/duplicate path 'x'/);
  });

  test('many files go in batches, in one transaction', async ({ pg: { db } }) => {
    const files = Array.from({ length: 1234 }, (_, i) => file(`f/${String(i).padStart(4, '0')}.txt`, `line ${i}\n`));
    const stored = await storeWorkspace(db.pool, files);
    expect((await readWorkspace(db.pool, stored.digest))?.length).toBe(1234);
  });

  test('taskChange: the input overlaid with the artifacts, diffed against the input; without a workspace, against empty', async ({ pg: { db } }) => {
    const ws = await storeWorkspace(db.pool, [file('README.md', '# App\n'), file('src/app.ts', 'const a = 1;\n')]);
    const taskId = randomUUID();
    const app = await storeArtifact(db.pool, { taskId, path: 'src/app.ts', agentId: 'coder-1', content: Buffer.from('const a = 2;\n') });
    const notes = await storeArtifact(db.pool, { taskId, path: 'NOTES.md', agentId: null, content: Buffer.from('done\n') });
    await storeArtifact(db.pool, { taskId, path: 'unrecorded.txt', agentId: null, content: Buffer.from('not in the log') });
    const artifacts = [app, notes];
    const change = await taskChange(db.pool, { id: taskId, workspace: { digest: ws.digest }, artifacts, deletedFiles: [] });
    expect(change.files).toEqual([
      { path: 'NOTES.md', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' },
      { path: 'src/app.ts', status: 'modified', additions: 1, deletions: 1, binary: false, oldMode: '100644', newMode: '100644' },
    ]);
    expect(change.patch).toContain('diff --git a/src/app.ts b/src/app.ts\n--- a/src/app.ts\n+++ b/src/app.ts\n@@ -1,1 +1,1 @@\n-const a = 1;\n+const a = 2;\n');
    expect(change.patch).not.toContain('unrecorded');
    const bare = await taskChange(db.pool, { id: taskId, workspace: null, artifacts: [notes], deletedFiles: [] });
    expect(bare.files).toEqual([{ path: 'NOTES.md', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' }]);
    expect(await taskChange(db.pool, { id: randomUUID(), workspace: { digest: ws.digest }, artifacts: [], deletedFiles: [] })).toEqual({ files: [], patch: '' });
    await expect(taskChange(db.pool, { id: taskId, workspace: { digest: 'e'.repeat(64) }, artifacts: [], deletedFiles: [] })).rejects.toThrow(/is not stored/);
    await expect(taskChange(db.pool, { id: taskId, workspace: null, artifacts: [{ path: 'missing.md', sha256: 'f'.repeat(64) }], deletedFiles: [] })).rejects.toThrow(/artifact 'missing.md' .*: the version recorded \(sha256 ffffffffffff…\) is not kept/);

    // Each artifact in the version recorded: a state from before a rewrite diffs as it stood then.
    await storeArtifact(db.pool, { taskId, path: 'src/app.ts', agentId: 'coder-1', content: Buffer.from('const a = 3;\n') });
    expect((await taskChange(db.pool, { id: taskId, workspace: { digest: ws.digest }, artifacts, deletedFiles: [] })).patch).toContain('+const a = 2;\n');

    // A file an agent deleted (FileDeleted) is gone from the tree: an input file shows as deleted.
    const gone = await taskChange(db.pool, { id: taskId, workspace: { digest: ws.digest }, artifacts: [notes], deletedFiles: ['README.md'] });
    expect(gone.files).toEqual([
      { path: 'NOTES.md', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' },
      { path: 'README.md', status: 'deleted', additions: 0, deletions: 1, binary: false, oldMode: '100644', newMode: null },
    ]);
    expect((await taskTree(db.pool, { id: taskId, workspace: { digest: ws.digest }, artifacts: [notes], deletedFiles: ['README.md'] })).tree.map((f) => f.path)).toEqual(['NOTES.md', 'src/app.ts']);
  });
});
