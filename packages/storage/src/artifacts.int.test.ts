import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { copyTaskFiles, readArtifact, storeArtifact } from './artifacts.ts';

describe('artifacts and their versions', () => {
  test('a fork gets each artifact in the version its copied history names, not as the source stored it since', async ({ pg: { db } }) => {
    const source = randomUUID();
    const first = await storeArtifact(db.pool, { taskId: source, path: 'api/inventory.ts', agentId: 'backend', content: Buffer.from('round 1\n') });
    const notes = await storeArtifact(db.pool, { taskId: source, path: 'notes.md', agentId: 'researcher-1', content: Buffer.from('# notes\n') });
    // A round of changes stores the file again: the source's current content moves on.
    const second = await storeArtifact(db.pool, { taskId: source, path: 'api/inventory.ts', agentId: 'backend', content: Buffer.from('round 2, documented\n'), owned: true });
    expect(second.sha256).not.toBe(first.sha256);
    expect((await readArtifact(db.pool, source, 'api/inventory.ts'))?.content.toString()).toBe('round 2, documented\n');

    // Forked at a point between the two stores: its history names the first.
    const fork = randomUUID();
    await copyTaskFiles(db.pool, source, fork, [first, notes]);
    const copied = await readArtifact(db.pool, fork, 'api/inventory.ts');
    expect(copied).toMatchObject({ path: 'api/inventory.ts', agentId: 'backend', sha256: first.sha256, bytes: first.bytes });
    expect(copied?.content.toString()).toBe('round 1\n');
    expect((await readArtifact(db.pool, fork, 'notes.md'))?.content.toString()).toBe('# notes\n');

    // The fork's own versions are kept too: a fork of the fork finds them.
    const forkOfFork = randomUUID();
    await copyTaskFiles(db.pool, fork, forkOfFork, [first]);
    expect((await readArtifact(db.pool, forkOfFork, 'api/inventory.ts'))?.content.toString()).toBe('round 1\n');
  });

  test('an artifact stored before versions were kept, and replaced since, is copied as it is now', async ({ pg: { db } }) => {
    const source = randomUUID();
    const old = await storeArtifact(db.pool, { taskId: source, path: 'report.md', agentId: 'report-writer-1', content: Buffer.from('old\n') });
    await storeArtifact(db.pool, { taskId: source, path: 'report.md', agentId: 'report-writer-1', content: Buffer.from('new\n') });
    await db.pool.query('delete from artifact_versions where task_id = $1 and sha256 = $2', [source, old.sha256]); // as if stored before the table existed
    const fork = randomUUID();
    await copyTaskFiles(db.pool, source, fork, [old]);
    expect((await readArtifact(db.pool, fork, 'report.md'))?.content.toString()).toBe('new\n');
  });
});
