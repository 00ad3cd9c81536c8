import pg from 'pg';

/**
 * Connections for a test's own statements (a look at a table, a session held open, a listener).
 *
 * A pg client whose server ends the session — the fixture dropping the test's database `with
 * (force)`, a test stopping Postgres, a session terminated on purpose — emits 'error'; so does a
 * pool for its idle clients, and a pool that ends keeps that listener on clients still closing.
 * With no listener that 'error' is thrown in the test worker: vitest counts it as an unhandled
 * error and fails the run even though every test passed. These listen, and the statement in
 * flight fails (rejects) as it always does, so nothing a test waits on is hidden.
 */
export function testPool(url: string, opts: { max?: number } = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 2 });
  pool.on('connect', (client) => client.on('error', () => {}));
  pool.on('error', () => {});
  return pool;
}

/** One connection (not yet connected) for a test's own statements; see testPool. */
export function testClient(url: string, opts: { connectionTimeoutMillis?: number } = {}): pg.Client {
  const client = new pg.Client({ connectionString: url, ...opts });
  client.on('error', () => {});
  return client;
}
