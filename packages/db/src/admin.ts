import pg from 'pg';

/** Create the database named in `url` if it does not exist (connects to the `postgres` database). */
export async function ensureDatabase(url: string): Promise<boolean> {
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`unsupported database name '${name}'`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  client.on('error', () => {}); // a lost connection fails the statement in flight; it must not kill the process
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount) return false;
    try {
      await client.query(`create database "${name}"`);
    } catch (err) {
      // Created concurrently: 42P04 once the other is committed, 23505 (pg_database's unique name) while both race.
      const code = (err as { code?: string }).code;
      if (code === '42P04' || code === '23505') return false;
      throw err;
    }
    return true;
  } finally {
    await client.end();
  }
}
