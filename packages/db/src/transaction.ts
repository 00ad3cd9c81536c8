import type pg from 'pg';

/**
 * Run `fn` in one transaction on a client of the pool: committed if it returns, rolled back if
 * it throws (the error goes on), the client released either way. `begin` may name an isolation
 * level (`begin isolation level repeatable read read only`).
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, begin = 'begin'): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(begin);
    const out = await fn(client);
    await client.query('commit');
    return out;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
