import { createDb, migrateToLatest } from './db.ts';
import { describeRebase, rebaseRestoredLog } from './restored-log.ts';

/** `pnpm migrate`: apply migrations to DATABASE_URL, retrying while Postgres is not yet up; renumber a log restored from another server (rebaseRestoredLog). */
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/baton';
const db = createDb(url, { max: 1, applicationName: 'baton-migrate' });
const deadline = Date.now() + Number(process.env.MIGRATE_WAIT_MS ?? 60_000);
for (let attempt = 1; ; attempt++) {
  try {
    const applied = await migrateToLatest(db.kysely);
    console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: already up to date');
    const rebased = await rebaseRestoredLog(db.pool);
    if (rebased) console.log(describeRebase(rebased));
    break;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (Date.now() > deadline) {
      console.error(`migrate: giving up: ${message}`);
      process.exitCode = 1;
      break;
    }
    console.error(`migrate: Postgres not ready (${message}); retrying (attempt ${attempt})`);
    await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
  }
}
await db.close();
