import { randomBytes } from 'node:crypto';
import { createDb, migrateToLatest } from '@baton/db';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { namespaceStreams } from './namespaces.ts';
import { resolveInfra, withDatabase } from './infra.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    natsUrl: string;
    templateDb: string;
    runId: string;
  }
}

/**
 * Once per run: find Postgres and NATS, migrate a template database that each test copies. At
 * the end, drop the run's databases and check that every test deleted its NATS namespace: a
 * stream left by one of this run's namespaces is deleted and fails the run, naming it.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const infra = await resolveInfra();
  const runId = randomBytes(3).toString('hex');
  const templateDb = `baton_tpl_${runId}`;
  const admin = new pg.Client({ connectionString: infra.databaseUrl });
  admin.on('error', (err) => console.warn(`[testing] the run's admin connection to Postgres was lost: ${err.message}`));
  await admin.connect();
  await dropRunDatabases(admin, 'baton_tpl_', true); // leftovers of killed runs older than an hour
  await sweepStaleStreams(infra.natsUrl); // and their NATS streams
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
    const left = await deleteRunStreams(infra.natsUrl, runId);
    await infra.stop();
    if (left.length > 0) {
      // vitest reports an error thrown here but still exits 0: fail the run explicitly.
      console.error(`[testing] FAIL: tests left ${left.length} NATS stream(s) behind (deleted now; a test that takes a namespace deletes it when it ends — deleteNamespace): ${left.join(', ')}`);
      process.exitCode = 1;
    }
  };
}

/** The namespaces tests make: newNamespace's (`t` + hex: the run's id + random) and the chaos script's. */
const TEST_NAMESPACE = /^(t[0-9a-f]{8,12}|chaos[0-9a-f]{6})$/;

/** Delete the streams of this run's namespaces; returns their names (none, when every test cleaned up). */
async function deleteRunStreams(natsUrl: string, runId: string): Promise<string[]> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const left = await namespaceStreams(jsm, (ns) => ns.length === 13 && ns.startsWith(`t${runId}`));
    for (const name of left) await jsm.streams.delete(name).catch(() => {});
    return left;
  } finally {
    await nc.close();
  }
}

/** A backstop for runs that were killed: streams of test namespaces created more than an hour ago. */
async function sweepStaleStreams(natsUrl: string): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const cutoff = Date.now() - 3_600_000;
    for await (const s of jsm.streams.list()) {
      const ns = /_([A-Za-z0-9]+)$/.exec(s.config.name)?.[1]?.toLowerCase();
      if (ns && TEST_NAMESPACE.test(ns) && Date.parse(s.created) < cutoff) await jsm.streams.delete(s.config.name).catch(() => {});
    }
  } finally {
    await nc.close();
  }
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
