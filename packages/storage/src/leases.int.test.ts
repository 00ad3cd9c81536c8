import { randomUUID } from 'node:crypto';
import { WATCH_SINCE_LAG_S } from '@baton/db';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { watchCandidates } from './leases.ts';

describe('watchCandidates', () => {
  // In one transaction, now() is one instant for the rows and the question: no timing luck.
  test("adds the column's own lag (WATCH_SINCE_LAG_S) to the grace: a task that stepped less than grace + lag ago is not a candidate", async ({ pg: { db } }) => {
    const graceMs = 5000;
    const busy = randomUUID();
    const idle = randomUUID();
    const client = await db.pool.connect();
    try {
      await client.query('begin');
      const row = (id: string, idleS: number) =>
        client.query(
          `insert into tasks (id, tenant_id, status, team, title, created_at, updated_at, version, pending_requests, watch_since)
           values ($1, 't', 'running', 'bench', 'x', now(), now(), 1, '[]', now() - make_interval(secs => $2))`,
          [id, idleS],
        );
      await row(busy, graceMs / 1000 + WATCH_SINCE_LAG_S / 2); // past the grace, but within the column's lag
      await row(idle, graceMs / 1000 + WATCH_SINCE_LAG_S + 0.5);
      expect(await watchCandidates(client, graceMs)).toEqual([{ id: idle, leaseLostAt: null }]);
      await client.query('rollback');
    } finally {
      client.release();
    }
  });
});
