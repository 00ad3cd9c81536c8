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
 * a time, across processes. A caller waits for the lock without holding a client of the pool — it
 * asks (`pg_try_advisory_lock`), gives the client back and asks again a little later — since
 * callers waiting on `pg_advisory_lock` each held one: a dozen at once took the whole pool, and the
 * holder's `fn` could then not get a client to finish (the gateway stalled, answering 503). The
 * lock goes with the client's session if it dies; a client whose unlock failed is destroyed
 * rather than returned to the pool still holding it.
 */
export async function withSessionLock<T>(pool: pg.Pool, name: string, fn: () => Promise<T>, o: { retryMs?: readonly number[] } = {}): Promise<T> {
  const retryMs = o.retryMs ?? [5, 10, 25, 50, 100];
  for (let attempt = 0; ; attempt++) {
    const client = await pool.connect();
    let held: boolean;
    try {
      held = (await client.query<{ held: boolean }>('select pg_try_advisory_lock(hashtext($1)) as held', [name])).rows[0]?.held === true;
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
    if (!held) {
      client.release();
      await new Promise((r) => setTimeout(r, retryMs[Math.min(attempt, retryMs.length - 1)] ?? 100));
      continue;
    }
    let broken: Error | undefined;
    try {
      return await fn();
    } finally {
      await client.query('select pg_advisory_unlock(hashtext($1))', [name]).catch((err: Error) => (broken = err));
      client.release(broken);
    }
  }
}
