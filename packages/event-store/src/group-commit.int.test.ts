import { randomUUID } from 'node:crypto';
import { taskStreamId, type NewEvent } from '@baton/domain';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { ConcurrencyError } from './errors.ts';
import { EventStore } from './store.ts';
import type { TaskRow } from './task-row.ts';

const failed = (): NewEvent => ({ id: randomUUID(), type: 'TaskFailed', data: { code: 'c', message: 'm' } });
const row = (id: string, version: number): TaskRow => ({ id, tenant_id: 't', status: 'running', team: 'bench', title: 'x', created_at: new Date().toISOString(), updated_at: new Date().toISOString(), version, pending_requests: [], next_deadline: null, watch_since: null, forked_from: null, forked_at_version: null });

describe('group commit', () => {
  test('concurrent appends to different streams are written together, each with its own result and read model', async ({ pg: { db } }) => {
    const store = new EventStore(db.pool, { groupCommit: true });
    const tasks = Array.from({ length: 40 }, () => randomUUID());
    const results = await Promise.all(tasks.map((id) => store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [failed(), failed()], readModel: row(id, 2) })));
    expect(results.every((r) => r.nextVersion === 2 && r.positions.length === 2 && !r.duplicate)).toBe(true);
    expect(store.committer?.batches).toBeGreaterThan(0); // the first went alone; the rest queued behind it
    for (const [i, id] of tasks.entries()) {
      const events = await store.readStream(taskStreamId(id));
      expect(events.map((e) => [e.version, e.position])).toEqual([[1, results[i]?.positions[0]], [2, results[i]?.positions[1]]]);
    }
    const { rows } = await db.pool.query('select count(*)::int as n from tasks where version = 2');
    expect(rows[0].n).toBe(40);
  });

  test('racing appenders on one stream: exactly one wins per version; duplicates are recognised', async ({ pg: { db } }) => {
    const store = new EventStore(db.pool, { groupCommit: true });
    const id = randomUUID();
    const others = Array.from({ length: 10 }, () => randomUUID());
    for (let version = 0; version < 4; version++) {
      const racers = Array.from({ length: 8 }, () => store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: version, events: [failed()] }));
      // Unrelated appends in the same batches must be unaffected by the losers.
      const bystanders = others.map((o) => store.append({ streamId: `agent-${o}-x`, taskId: o, expectedVersion: version, events: [failed()] }));
      const settled = await Promise.allSettled(racers);
      expect(settled.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(settled.filter((r) => r.status === 'rejected').every((r) => (r as PromiseRejectedResult).reason instanceof ConcurrencyError)).toBe(true);
      expect((await Promise.all(bystanders)).every((r) => r.nextVersion === version + 1)).toBe(true);
    }
    const again = [failed()];
    const first = await store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 4, events: again });
    const [x, y] = await Promise.all([
      store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 4, events: again }),
      store.append({ streamId: `agent-${others[0]}-x`, taskId: others[0] as string, expectedVersion: 4, events: [failed()] }),
    ]);
    expect(first.duplicate).toBe(false);
    expect(x).toMatchObject({ duplicate: true, nextVersion: 5 });
    expect(y.nextVersion).toBe(5);
  });

  test('if a batch statement fails as a whole, each append is retried alone', async ({ pg: { db } }) => {
    let failNextBatch = true;
    const flaky = new Proxy(db.pool, {
      get(target, prop, receiver) {
        if (prop === 'query') {
          return (q: unknown, ...rest: unknown[]) => {
            if (failNextBatch && typeof q === 'object' && (q as { name?: string }).name === 'baton_append_batch') {
              failNextBatch = false;
              return Promise.reject(new Error('simulated: batch failed'));
            }
            return (target.query as (...a: unknown[]) => unknown).call(target, q, ...rest);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const store = new EventStore(flaky, { groupCommit: true });
    const ids = Array.from({ length: 12 }, () => randomUUID());
    const results = await Promise.all(ids.map((id) => store.append({ streamId: taskStreamId(id), taskId: id, expectedVersion: 0, events: [failed()] })));
    expect(failNextBatch).toBe(false);
    expect(results.every((r) => r.nextVersion === 1)).toBe(true);
    const { rows } = await db.pool.query('select count(*)::int as n from events');
    expect(rows[0].n).toBe(12);
  });
});
