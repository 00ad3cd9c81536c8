import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createDb, rebaseRestoredLog, restoredLogProblem, schemaReady } from '@baton/db';
import { pgTest as test, postgresBinDir, privatePostgres, waitFor } from '@baton/testing';
import { describe, expect } from 'vitest';
import { comesBefore, EventStore, START, type LogCursor } from './store.ts';
import { handleCommand, taskCommits } from './tasks.ts';

const run = promisify(execFile);

const submit = (store: EventStore, id: string) =>
  handleCommand(store, id, {
    type: 'SubmitTask', prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null,
    metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null,
  });

const ids = (events: { event: { id: string } }[]) => events.map((e) => e.event.id);

describe('a database restored onto another Postgres server (pg_dump → pg_restore)', () => {
  test("its ids are compared as numbers: a log whose ids cross a power of ten (99 and 10…0) ahead of the server's counter is found (it had sorted them as text: the restore was missed, and every start sorted the whole log)", async ({ pg }) => {
    const [a, b] = [randomUUID(), randomUUID()];
    await submit(pg.store, a);
    await submit(pg.store, b);
    expect(await restoredLogProblem(pg.db.pool)).toBeNull();
    const next = (await pg.db.pool.query<{ next: string }>('select pg_snapshot_xmax(pg_current_snapshot())::text as next')).rows[0]!.next;
    const ahead = `1${'0'.repeat(next.length + 1)}`; // sorts before '99' as text, far past the counter as a number
    await pg.db.pool.query('alter table events disable trigger events_no_update_delete');
    await pg.db.pool.query(`update events set transaction_id = (case when task_id = $1 then '99' else $2 end)::xid8`, [a, ahead]);
    await pg.db.pool.query('alter table events enable trigger events_no_update_delete');
    expect(await restoredLogProblem(pg.db.pool)).toMatch(new RegExp(`^the event log's transaction ids \\(up to ${ahead}\\) are ahead of this Postgres server's`));
  });

  test("its log's transaction ids are ahead of the new server's: readiness says so; the migrations step renumbers them in order, checkpoints with them — the relay's tail goes on where it stood, new events after the old", async ({ pg }) => {
    // A log of several transactions on the shared server (whose transaction ids are far ahead of a fresh cluster's).
    const tasks = [randomUUID(), randomUUID(), randomUUID()];
    await submit(pg.store, tasks[0]!);
    // A transaction id no event has, between two that have (a checkpoint may lie there).
    const gap = BigInt((await pg.db.pool.query<{ x: string }>('select pg_current_xact_id()::text as x')).rows[0]!.x);
    for (const id of tasks.slice(1)) await submit(pg.store, id);
    for (const id of tasks) await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    // (A tail shows a commit once no older transaction runs anywhere on the server: other tests' may.)
    const count = Number((await pg.db.pool.query<{ n: string }>('select count(*) as n from events')).rows[0]!.n);
    await waitFor(async () => (await pg.store.tail(START, 1000)).events.length === count, { what: 'every event visible to a tail' });
    const before = (await pg.store.tail(START, 1000)).events;
    expect(before.length).toBeGreaterThanOrEqual(6);
    // The relay had published up to the middle; a second processor's checkpoint lies between two transactions.
    const middle = before[Math.floor(before.length / 2)]!.cursor;
    await pg.store.saveCheckpoint('relay', middle);
    const between: LogCursor = { txid: gap, position: 0n };
    await pg.store.saveCheckpoint('other', between);
    const commitsBefore = await taskCommits(pg.store, tasks[0]!);

    const dir = await mkdtemp(path.join(tmpdir(), 'baton-restore-'));
    const server = await privatePostgres();
    const bin = postgresBinDir()!;
    try {
      const dump = path.join(dir, 'baton.dump');
      await run(path.join(bin, 'pg_dump'), ['-Fc', '-f', dump, pg.url]);
      const url = server.url.replace(/\/postgres$/, '/restored');
      await run(path.join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', 'restored']);
      await run(path.join(bin, 'pg_restore'), ['--no-owner', '-d', url, dump]);
      const db = createDb(url, { max: 2 });
      const store = new EventStore(db.pool);
      try {
        // Every restored event looks uncommitted to a tail here: the relay would publish nothing.
        expect((await store.tail(START, 1000)).events).toEqual([]);
        const problem = await restoredLogProblem(db.pool);
        expect(problem).toMatch(/^the event log's transaction ids \(up to \d+\) are ahead of this Postgres server's \(next \d+\): the database was restored from another server; run the migrations .* which renumber them/);
        await expect(schemaReady(db.pool)()).rejects.toThrow(problem!);

        const rebased = await rebaseRestoredLog(db.pool);
        expect(rebased).toEqual({ transactions: new Set(before.map((e) => e.cursor.txid)).size, burned: expect.any(Number) });
        expect(await restoredLogProblem(db.pool)).toBeNull();
        await expect(schemaReady(db.pool)()).resolves.toBeUndefined();
        expect(await rebaseRestoredLog(db.pool)).toBeNull(); // once is enough

        // The same events in the same order; each checkpoint between the same two events as before.
        const after = (await store.tail(START, 1000)).events;
        expect(ids(after)).toEqual(ids(before));
        expect(after.map((e) => e.event.position)).toEqual(before.map((e) => e.event.position));
        expect(ids((await store.tail(await store.loadCheckpoint('relay'), 1000)).events)).toEqual(ids(before.filter((e) => comesBefore(middle, e.cursor))));
        expect(ids((await store.tail(await store.loadCheckpoint('other'), 1000)).events)).toEqual(ids(before.filter((e) => e.cursor.txid > gap)));
        expect(before.some((e) => e.cursor.txid < gap)).toBe(true);
        // A fork still starts only between commits: the same versions share a commit.
        const grouping = (m: ReadonlyMap<number, string>) => [...m.entries()].map(([v, c]) => [v, [...m.entries()].filter(([, d]) => d === c).map(([w]) => w)]);
        expect(grouping(await taskCommits(store, tasks[0]!))).toEqual(grouping(commitsBefore));
        // What is written now comes after all of it.
        const next = randomUUID();
        await submit(store, next);
        const tail = (await store.tail(await store.loadCheckpoint('relay'), 1000)).events;
        expect(tail.at(-1)!.event.taskId).toBe(next);
      } finally {
        await db.close();
      }
    } finally {
      await server.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
