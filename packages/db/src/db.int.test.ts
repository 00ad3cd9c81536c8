import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { createDb } from './db.ts';

describe('createDb({ countQueries })', () => {
  test('counts pool queries, kysely queries and queries on a dedicated session of the pool', async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2, countQueries: true });
    try {
      const at0 = db.queriesIssued();
      await db.pool.query('select 1');
      expect(db.queriesIssued()).toBe(at0 + 1);
      const session = await db.pool.connect(); // as the relay holds its LISTEN / advisory-lock session
      try {
        await session.query('select 2');
        await session.query({ name: 'counted_named', text: 'select $1::int as n', values: [3] });
      } finally {
        session.release();
      }
      expect(db.queriesIssued()).toBe(at0 + 3);
      await db.kysely.selectFrom('tasks').select('id').limit(1).execute();
      expect(db.queriesIssued()).toBe(at0 + 4);
    } finally {
      await db.close();
    }
  });

  test('counters belong to their Db, and counting is off unless asked for', async ({ pg: { url } }) => {
    const counted = createDb(url, { max: 1, countQueries: true });
    const plain = createDb(url, { max: 1 });
    try {
      await plain.pool.query('select 1');
      expect(counted.queriesIssued()).toBe(0);
      expect(plain.queriesIssued()).toBe(0);
      await counted.pool.query('select 1');
      expect(counted.queriesIssued()).toBe(1);
    } finally {
      await counted.close();
      await plain.close();
    }
  });
});
