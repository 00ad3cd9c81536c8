import { describe, expect } from 'vitest';
import { pgTest as test } from './fixtures.ts';
import { testClient, testPool } from './pg-clients.ts';
import { waitFor } from './wait.ts';

/** Ends every session of `app` but the caller's, as `drop database … with (force)` does. */
const terminate = (pool: { query: (sql: string, values: unknown[]) => Promise<unknown> }, app: string) =>
  pool.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()`, [app]);

describe("a test's own connections outlive their server's end", () => {
  test('an idle pooled connection the server ends is dropped, not thrown in the worker', async ({ pg: { url, db } }) => {
    const pool = testPool(`${url}?application_name=t_pool`);
    await pool.query('select 1'); // the client now waits idle in the pool
    expect(pool.idleCount).toBe(1);
    await terminate(db.pool, 't_pool');
    await waitFor(() => pool.totalCount === 0, { what: 'the pool to drop the ended connection' });
    expect((await pool.query<{ n: number }>('select 2 as n')).rows[0]?.n).toBe(2); // and connects afresh
    await pool.end();
  });

  test('a held client whose session ends fails its next statement and nothing else', async ({ pg: { url, db } }) => {
    const client = testClient(`${url}?application_name=t_client`);
    await client.connect();
    await terminate(db.pool, 't_client');
    await waitFor(() => client.query('select 1').then(() => false, () => true), { what: 'the ended session to fail a statement' });
    await client.end().catch(() => {});
  });
});
