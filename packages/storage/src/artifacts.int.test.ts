import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { copyTaskFiles, readArtifact, readArtifactVersion, storeArtifact, type StoredArtifact } from './artifacts.ts';

const files = (artifacts: StoredArtifact[], o: { versions?: string[]; movedOn?: string[] } = {}) => ({ artifacts, versions: o.versions ?? artifacts.map((a) => a.sha256), movedOn: o.movedOn ?? [] });

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
    await copyTaskFiles(db.pool, source, fork, files([first, notes]));
    const copied = await readArtifact(db.pool, fork, 'api/inventory.ts');
    expect(copied).toMatchObject({ path: 'api/inventory.ts', agentId: 'backend', sha256: first.sha256, bytes: first.bytes });
    expect(copied?.content.toString()).toBe('round 1\n');
    expect((await readArtifact(db.pool, fork, 'notes.md'))?.content.toString()).toBe('# notes\n');

    // The fork's own versions are kept too: a fork of the fork finds them.
    const forkOfFork = randomUUID();
    await copyTaskFiles(db.pool, fork, forkOfFork, files([first]));
    expect((await readArtifact(db.pool, forkOfFork, 'api/inventory.ts'))?.content.toString()).toBe('round 1\n');
  });

  test('an artifact stored before versions were kept, and replaced since, is copied as it is now', async ({ pg: { db } }) => {
    const source = randomUUID();
    const old = await storeArtifact(db.pool, { taskId: source, path: 'report.md', agentId: 'report-writer-1', content: Buffer.from('old\n') });
    await storeArtifact(db.pool, { taskId: source, path: 'report.md', agentId: 'report-writer-1', content: Buffer.from('new\n') });
    await db.pool.query('delete from artifact_versions where task_id = $1 and sha256 = $2', [source, old.sha256]); // as if stored before the table existed
    const fork = randomUUID();
    await copyTaskFiles(db.pool, source, fork, files([old]));
    expect((await readArtifact(db.pool, fork, 'report.md'))?.content.toString()).toBe('new\n');
  });

  test("every version the fork's history names comes along (its ?at= reads, a rebuilt workspace), and a live workspace of an agent that moved on past the fork point does not", async ({ pg: { db } }) => {
    const source = randomUUID();
    const v1 = await storeArtifact(db.pool, { taskId: source, path: 'web/x.ts', agentId: 'b', content: Buffer.from('one\n') });
    const v2 = await storeArtifact(db.pool, { taskId: source, path: 'web/x.ts', agentId: 'b', content: Buffer.from('two\n'), owned: true });
    const later = await storeArtifact(db.pool, { taskId: source, path: 'web/x.ts', agentId: 'b', content: Buffer.from('three\n'), owned: true });
    for (const agent of ['b', 'paused']) {
      await db.pool.query(`insert into sandboxes (id, task_id, agent_id, provider, state) values ($1, $2, $3, 'local', 'paused')`, [`${source}/${agent}`, source, agent]);
      await db.pool.query(`insert into sandbox_files (sandbox_id, path, mode, content) values ($1, 'web/x.ts', 420, $2)`, [`${source}/${agent}`, Buffer.from(`${agent}'s workspace now\n`)]);
    }
    const fork = randomUUID();
    // Forked where v2 is the last the history names; b went on (stored v3 since), 'paused' recorded nothing after.
    await copyTaskFiles(db.pool, source, fork, files([v2], { versions: [v1.sha256, v2.sha256], movedOn: ['b'] }));
    expect((await readArtifactVersion(db.pool, fork, v1.sha256))?.toString()).toBe('one\n');
    expect((await readArtifactVersion(db.pool, fork, v2.sha256))?.toString()).toBe('two\n');
    expect(await readArtifactVersion(db.pool, fork, later.sha256)).toBeNull();
    const { rows } = await db.pool.query('select s.agent_id, f.content from sandboxes s left join sandbox_files f on f.sandbox_id = s.id where s.task_id = $1 order by 1', [fork]);
    expect(rows.map((r) => [r.agent_id, r.content?.toString()])).toEqual([['paused', "paused's workspace now\n"]]);
  });
});
