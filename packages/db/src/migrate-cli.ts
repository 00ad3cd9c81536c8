import { createDb, migrateToLatest, migrationFailedForGood } from './db.ts';
import { describeMigrations } from './describe-migrations.ts';
import { describeRebase, rebaseRestoredLog } from './restored-log.ts';

/** `pnpm migrate`: apply migrations to DATABASE_URL, retrying while Postgres is not yet up; renumber a log restored from another server (rebaseRestoredLog). */
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/baton';
const db = createDb(url, { max: 1, applicationName: 'baton-migrate' });
const deadline = Date.now() + Number(process.env.MIGRATE_WAIT_MS ?? 60_000);
for (let attempt = 1; ; attempt++) {
  try {
    const { applied, newer } = await migrateToLatest(db.kysely);
    console.log(describeMigrations(applied, newer));
    const rebased = await rebaseRestoredLog(db.pool);
    if (rebased) console.log(describeRebase(rebased));
    break;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // A server that answers and refuses (a migration's own error, migrations that do not fit): no wait mends it.
    if (migrationFailedForGood(err)) {
      console.error(`migrate: failed: ${message}`);
      process.exitCode = 1;
      break;
    }
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
