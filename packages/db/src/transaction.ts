import pg from 'pg';

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

/** Sessions that hold advisory locks at once, per pool (more callers wait for one: each holder finishes on the pool's own clients). */
const LOCK_SESSIONS = 4;
/** Waits between a caller's asks for a lock another holds (the last repeating). */
const LOCK_RETRY_MS = [5, 10, 25, 50, 100];
const lockSessions = new WeakMap<pg.Pool, pg.Pool>();

/**
 * The connections a pool's callers hold advisory locks on: a pool of their own, beside the pool
 * `fn` works with. Held on the working pool, a lock took a client `fn` then needed: as many forks
 * at once as the pool had clients (each under its own Idempotency-Key) held them all, and none
 * could finish (503s, the gateway stalled). Idle sessions close after a second.
 */
function lockPoolOf(pool: pg.Pool): pg.Pool {
  let locks = lockSessions.get(pool);
  if (!locks) {
    const options = (pool as unknown as { options: pg.PoolConfig }).options;
    locks = new pg.Pool({ ...options, max: LOCK_SESSIONS, idleTimeoutMillis: 1000, allowExitOnIdle: true, application_name: `${options.application_name ?? 'baton'}-locks` });
    locks.on('error', () => {}); // a session lost while idle: nothing is held on it
    lockSessions.set(pool, locks);
  }
  return locks;
}

/**
 * Run `fn` while holding a session advisory lock named `name` (on a session of its own, so `fn`
 * uses the pool's clients freely and runs several transactions): callers with the same name run
 * one at a time, across processes. A caller waits for the lock without holding any connection —
 * it asks (`pg_try_advisory_lock`), gives the session back and asks again a little later — since
 * callers waiting on `pg_advisory_lock` each held one: a dozen at once took the whole pool, and
 * the holder's `fn` could then not get a client to finish. The lock goes with its session if that
 * dies; a session whose unlock failed is closed rather than given back still holding it.
 */
export async function withSessionLock<T>(pool: pg.Pool, name: string, fn: () => Promise<T>): Promise<T> {
  const locks = lockPoolOf(pool);
  for (let attempt = 0; ; attempt++) {
    const session = await locks.connect();
    let held: boolean;
    try {
      held = (await session.query<{ held: boolean }>('select pg_try_advisory_lock(hashtext($1)) as held', [name])).rows[0]?.held === true;
    } catch (err) {
      session.release(true);
      throw err;
    }
    if (!held) {
      session.release();
      await new Promise((r) => setTimeout(r, LOCK_RETRY_MS[Math.min(attempt, LOCK_RETRY_MS.length - 1)]));
      continue;
    }
    let broken: Error | undefined;
    try {
      return await fn();
    } finally {
      await session.query('select pg_advisory_unlock(hashtext($1))', [name]).catch((err: Error) => (broken = err));
      session.release(broken);
    }
  }
}
