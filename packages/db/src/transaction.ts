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

/**
 * Run `fn` while holding a session advisory lock named `name` (one client of the pool holds it,
 * so `fn` may use other clients and several transactions): callers with the same name run one at
 * a time, across processes. The lock goes with the client's session if it dies; a client whose
 * unlock failed is destroyed rather than returned to the pool still holding it.
 */
export async function withSessionLock<T>(pool: pg.Pool, name: string, fn: () => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('select pg_advisory_lock(hashtext($1))', [name]);
    try {
      return await fn();
    } finally {
      await client.query('select pg_advisory_unlock(hashtext($1))', [name]).catch((err: Error) => (broken = err));
    }
  } finally {
    client.release(broken);
  }
}
