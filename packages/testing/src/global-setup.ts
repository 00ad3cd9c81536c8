import { randomBytes } from 'node:crypto';
import { createDb, migrateToLatest } from '@baton/db';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { resolveInfra, withDatabase } from './infra.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    natsUrl: string;
    templateDb: string;
    runId: string;
  }
}

/** Once per run: find Postgres and NATS, migrate a template database that each test copies. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const infra = await resolveInfra();
  const runId = randomBytes(3).toString('hex');
  const templateDb = `baton_tpl_${runId}`;
  const admin = new pg.Client({ connectionString: infra.databaseUrl });
  await admin.connect();
  await dropRunDatabases(admin, 'baton_tpl_', true); // leftovers of killed runs older than an hour
  await admin.query(`create database ${templateDb}`);
  const db = createDb(withDatabase(infra.databaseUrl, templateDb), { max: 1 });
  await migrateToLatest(db.kysely);
  await db.close();
  project.provide('databaseUrl', infra.databaseUrl);
  project.provide('natsUrl', infra.natsUrl);
  project.provide('templateDb', templateDb);
  project.provide('runId', runId);
  return async () => {
    await dropRunDatabases(admin, `baton_t_${runId}_`, false);
    await admin.query(`drop database if exists ${templateDb} with (force)`);
    await admin.end();
    await infra.stop();
  };
}

async function dropRunDatabases(admin: pg.Client, prefix: string, onlyStale: boolean): Promise<void> {
  const { rows } = await admin.query<{ datname: string }>(
    onlyStale
      ? `select datname from pg_database where (datname like 'baton_tpl_%' or datname like 'baton_t_%')
           and not exists (select 1 from pg_stat_activity a where a.datname = pg_database.datname)
           and (pg_stat_file('base/' || oid || '/PG_VERSION')).modification < now() - interval '1 hour'`
      : `select datname from pg_database where datname like $1 || '%'`,
    onlyStale ? [] : [prefix],
  ).catch(() => ({ rows: [] as { datname: string }[] }));
  for (const { datname } of rows) await admin.query(`drop database if exists "${datname}" with (force)`).catch(() => {});
}
