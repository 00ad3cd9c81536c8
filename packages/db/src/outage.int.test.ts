import { privatePostgres, waitFor, type PrivatePostgres } from '@baton/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from './db.ts';
import { inTransaction } from './transaction.ts';

/**
 * A pool's clients lose their server: Postgres (a private one) is stopped and started again
 * under clients that are checked out — a dedicated session held like the relay's, a statement in
 * flight, a transaction in progress. Nothing is thrown out of an event emitter (that would kill
 * the process); the statements fail; the loss is reported once; the pool works again once
 * Postgres is back.
 */
describe('createDb: Postgres goes away under checked-out clients', () => {
  let server: PrivatePostgres;
  beforeAll(async () => {
    server = await privatePostgres();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it.each(['stop', 'crash'] as const)('%s: every client has an error listener, in-flight work fails, the loss is logged, the pool recovers', async (how) => {
    const warnings: { obj: object; msg: string }[] = [];
    const db = createDb(server.url, { max: 4, log: { warn: (obj, msg) => warnings.push({ obj, msg }) } });
    try {
      // A session held for a long time, as the relay holds its LISTEN session.
      const session = await db.pool.connect();
      expect(session.listenerCount('error')).toBeGreaterThan(0); // the pool's own idle listener is gone by now
      // A statement in flight on a client kysely checked out, and a transaction in progress.
      const inFlight = sql`select pg_sleep(30)`.execute(db.kysely).then(() => 'finished', (err: Error) => err.message);
      const txn = inTransaction(db.pool, async (c) => {
        await c.query('select 1');
        await c.query('select pg_sleep(30)');
      }).then(() => 'committed', (err: Error) => err.message);
      await waitFor(async () => (await db.pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where query = 'select pg_sleep(30)'`)).rows[0]?.n === 2, { what: 'both sleeps running' });

      await (how === 'stop' ? server.stop() : server.crash());
      expect(await inFlight).toMatch(/terminat|Connection/i);
      expect(await txn).toMatch(/terminat|Connection/i);
      await waitFor(() => warnings.length > 0, { what: 'the loss to be reported' });
      expect(warnings).toHaveLength(1); // once for the pool, not once per client
      expect(warnings[0]?.msg).toMatch(/Postgres connection lost/);
      await expect(session.query('select 1')).rejects.toThrow(/not queryable|terminated/i);
      session.release(); // a broken client is dropped, not pooled

      // While Postgres is away, a statement fails fast instead of hanging.
      await expect(db.pool.query('select 1')).rejects.toThrow(/ECONNREFUSED/);
      await server.start();
      expect((await db.pool.query<{ ok: number }>('select 1 as ok')).rows).toEqual([{ ok: 1 }]);
      expect((await sql<{ ok: number }>`select 2 as ok`.execute(db.kysely)).rows).toEqual([{ ok: 2 }]);
      expect(await inTransaction(db.pool, async (c) => (await c.query<{ ok: number }>('select 3 as ok')).rows[0]?.ok)).toBe(3);
    } finally {
      await server.start();
      await db.close();
    }
  });
});
