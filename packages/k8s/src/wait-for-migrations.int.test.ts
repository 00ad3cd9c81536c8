import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb, migrateToLatest } from '@baton/db';
import { testClient, waitFor, withDatabase } from '@baton/testing';
import type pg from 'pg';
import { afterAll, describe, expect, inject, test } from 'vitest';
import { build } from './kustomize.ts';

/**
 * The init container's script (infra/k8s/base/wait-for-migrations.yaml), taken from the
 * rendered ConfigMap and run as the pods run it, against real Postgres: it waits while a
 * migration the image ships is not recorded, and lets the service start once all are.
 */
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const configMap = build(path.join(ROOT, 'infra/k8s/base')).find((x) => x.resource.metadata.name === 'baton-wait-for-migrations')!.resource as unknown as { data: Record<string, string> };
const script = path.join(mkdtempSync(path.join(tmpdir(), 'baton-wait-')), 'wait-for-migrations.cjs');
writeFileSync(script, configMap.data['wait-for-migrations.cjs']!);

const started: ChildProcess[] = [];
afterAll(() => {
  for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
});

function run(databaseUrl: string) {
  // BATON_APP_DIR: the repository stands for the image's /app (same layout: packages/db and its node_modules).
  const p = spawn(process.execPath, [script], { env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl, BATON_APP_DIR: ROOT, WAIT_INTERVAL_MS: '100' }, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(p);
  let out = '';
  p.stdout.on('data', (b: Buffer) => (out += b.toString()));
  p.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => p.on('exit', (code) => resolve(code)));
  return { p, output: () => out, exited };
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>, url = inject('databaseUrl')): Promise<T> {
  const c = testClient(url);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('wait-for-migrations (the init container of every Baton pod)', () => {
  test('waits on an empty database, and lets the pod start once the migrations are applied; a newer schema is fine', async () => {
    const name = `baton_t_${inject('runId')}_k8s${randomBytes(3).toString('hex')}`; // dropped by the run's teardown if the test dies
    await admin((c) => c.query(`create database ${name}`));
    const url = withDatabase(inject('databaseUrl'), name);
    try {
      const w = run(url);
      await waitFor(() => w.output().includes('wait-for-migrations: no migration applied yet; waiting for the Job baton-migrate'), { what: 'the script to say it waits', timeoutMs: 10_000 });
      await new Promise((r) => setTimeout(r, 300));
      expect(w.p.exitCode).toBeNull(); // still waiting

      const db = createDb(url, { max: 1 });
      const { applied } = await migrateToLatest(db.kysely);
      await db.close();
      expect(await w.exited).toBe(0);
      expect(w.output()).toContain(`the schema has the image's ${applied.length} migrations (last ${applied[applied.length - 1]})`);

      // One migration missing (an older schema than the image): waits, naming it; back, it goes on.
      const last = applied[applied.length - 1]!;
      await admin((c) => c.query('delete from kysely_migration where name = $1', [last]), url);
      const w2 = run(url);
      await waitFor(() => w2.output().includes(`not applied yet: ${last}`), { what: 'the missing migration named', timeoutMs: 10_000 });
      expect(w2.p.exitCode).toBeNull();
      await admin((c) => c.query(`insert into kysely_migration (name, timestamp) values ($1, now()::text), ('999_a_later_release', now()::text)`, [last]), url);
      expect(await w2.exited).toBe(0);
    } finally {
      await admin((c) => c.query(`drop database if exists ${name} with (force)`));
    }
  });

  test('keeps waiting, saying why, while Postgres cannot be reached', async () => {
    const w = run('postgres://baton@127.0.0.1:1/baton');
    await waitFor(() => /wait-for-migrations: Postgres: .*ECONNREFUSED/.test(w.output()), { what: 'the connection error reported', timeoutMs: 10_000 });
    expect(w.p.exitCode).toBeNull();
    w.p.kill('SIGTERM');
    await w.exited;
  });
});
