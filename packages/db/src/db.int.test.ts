import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { Migrator } from 'kysely/migration';
import { ensureDatabase } from './admin.ts';
import { claimNamespace, createDb, migrateToLatest, migrationFailedForGood, MigrationsMismatchError, schemaReady, SchemaNotReadyError } from './db.ts';
import { migrationProvider } from './migrations/index.ts';
import { withSessionLock } from './transaction.ts';

describe('createDb({ countQueries })', () => {
  test('counts pool queries, kysely queries and queries on a dedicated session of the pool', async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2, countQueries: true });
    try {
      const at0 = db.queriesIssued();
      await db.pool.query('select 1');
      expect(db.queriesIssued()).toBe(at0 + 1);
      const session = await db.pool.connect(); // as the relay holds its LISTEN / advisory-lock session
      try {
        await session.query('select 2');
        await session.query({ name: 'counted_named', text: 'select $1::int as n', values: [3] });
      } finally {
        session.release();
      }
      expect(db.queriesIssued()).toBe(at0 + 3);
      await db.kysely.selectFrom('tasks').select('id').limit(1).execute();
      expect(db.queriesIssued()).toBe(at0 + 4);
    } finally {
      await db.close();
    }
  });

  test('counters belong to their Db, and counting is off unless asked for', async ({ pg: { url } }) => {
    const counted = createDb(url, { max: 1, countQueries: true });
    const plain = createDb(url, { max: 1 });
    try {
      await plain.pool.query('select 1');
      expect(counted.queriesIssued()).toBe(0);
      expect(plain.queriesIssued()).toBe(0);
      await counted.pool.query('select 1');
      expect(counted.queriesIssued()).toBe(1);
    } finally {
      await counted.close();
      await plain.close();
    }
  });

  test("a database past this code (a later release's migrations applied, then the code rolled back) is left as it is — kysely had called it corrupted and the rollback was refused; one migrated by another line of releases is said so at once; a statement's error is for good, a server not reachable is not", async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2 });
    try {
      await migrateToLatest(db.kysely);
      await db.pool.query(`insert into kysely_migration (name, timestamp) values ('999_from_a_later_release', now()::text)`);
      expect(await migrateToLatest(db.kysely)).toEqual({ applied: [], newer: ['999_from_a_later_release'] });
      await schemaReady(db.pool)(); // and the services run on it
      // One this code does not know among those it knows (numbered before its last): not a later release's.
      await db.pool.query(`insert into kysely_migration (name, timestamp) values ('015b_from_a_branch', now()::text)`);
      await expect(migrateToLatest(db.kysely)).rejects.toThrow('this database has migrations this code does not know (015b_from_a_branch, 999_from_a_later_release), among those it knows (not after them): it was migrated by another line of releases');
      await db.pool.query(`delete from kysely_migration where name = '015b_from_a_branch'`);
      // Missing one this code knows while having one it does not: another line of releases.
      await db.pool.query(`delete from kysely_migration where name = '023_deployment_id'`);
      const err = await migrateToLatest(db.kysely).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MigrationsMismatchError);
      expect((err as Error).message).toBe('this database has migrations this code does not know (999_from_a_later_release) and lacks ones it does (023_deployment_id): it was migrated by another line of releases; run the release that made it, or restore a backup from before');
      expect(migrationFailedForGood(err)).toBe(true);
      expect(migrationFailedForGood(await db.pool.query('select nonsense from nowhere').catch((e: unknown) => e))).toBe(true);
      const away = createDb('postgres://postgres@127.0.0.1:1/nowhere', { max: 1 });
      expect(migrationFailedForGood(await away.pool.query('select 1').catch((e: unknown) => e))).toBe(false);
      await away.close();
    } finally {
      await db.close();
    }
  });

  test('014 keeps the dead letters recorded before (no stored time) and takes a new message of the same stream sequence beside one', async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2 });
    try {
      const down = await new Migrator({ db: db.kysely, provider: migrationProvider }).migrateTo('013_artifact_versions');
      expect(down.error).toBeUndefined();
      const insert = `insert into dead_letters (consumer, subject, stream_sequence, deliveries, payload, error) values ('c', 's', 7, 5, '{}', 'e')`;
      await db.pool.query(insert);
      await expect(db.pool.query(insert)).rejects.toThrow(/dead_letters_uq/); // the sequence alone was the key
      expect((await migrateToLatest(db.kysely)).applied).toContain('014_dead_letter_identity');
      const again = `insert into dead_letters (consumer, subject, stream_sequence, stored_at, deliveries, payload, error) values ('c', 's', 7, '2026-11-27T04:00:00.000001Z', 5, '{}', 'e') on conflict (consumer, stream_sequence, stored_at) do nothing`;
      await db.pool.query(again);
      await db.pool.query(again); // the same message: once
      const { rows } = await db.pool.query<{ stored_at: Date | null }>('select stored_at from dead_letters order by id');
      expect(rows.map((r) => r.stored_at?.toISOString() ?? null)).toEqual([null, '2026-11-27T04:00:00.000Z']);
    } finally {
      await db.close();
    }
  });

  test("020 fills in the version each fork made before it was copied at, from the fork's TaskSubmitted", async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2 });
    try {
      const down = await new Migrator({ db: db.kysely, provider: migrationProvider }).migrateTo('019_deployment_namespace');
      expect(down.error).toBeUndefined();
      const [source, fork, plain] = [randomUUID(), randomUUID(), randomUUID()];
      for (const [id, forkedFrom] of [[fork, { taskId: source, atVersion: 7 }], [plain, null]] as const) {
        await db.pool.query(`insert into events (stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata) values ($1, 1, $2, $3, 'TaskSubmitted', 1, $4, '{}')`, [`task-${id}`, id, randomUUID(), JSON.stringify({ prompt: 'p', forkedFrom })]);
        await db.pool.query(`insert into tasks (id, tenant_id, status, team, title, created_at, updated_at, version, forked_from) values ($1, 't', 'pending', 'bench', 'p', now(), now(), 1, $2)`, [id, forkedFrom?.taskId ?? null]);
      }
      expect((await migrateToLatest(db.kysely)).applied).toContain('020_task_forks');
      const { rows } = await db.pool.query<{ id: string; forked_at_version: number | null }>('select id, forked_at_version from tasks');
      expect(new Map(rows.map((r) => [r.id, r.forked_at_version]))).toEqual(new Map([[fork, 7], [plain, null]]));
    } finally {
      await db.close();
    }
  });

  test('011 keeps an events_task_tx_idx built beforehand (concurrently, on a large log) instead of failing', async ({ pg: { url } }) => {
    const db = createDb(url, { max: 2 });
    try {
      const down = await new Migrator({ db: db.kysely, provider: migrationProvider }).migrateTo('010_webhook_redeliveries');
      expect(down.error).toBeUndefined();
      expect(down.results?.map((r) => r.migrationName)).toContain('011_events_task_tx_idx');
      await db.pool.query('create index concurrently events_task_tx_idx on events (task_id, transaction_id, global_position)');
      expect((await migrateToLatest(db.kysely)).applied).toContain('011_events_task_tx_idx');
      const idx = await db.pool.query(`select indexdef from pg_indexes where indexname = 'events_task_tx_idx'`);
      expect(idx.rows.map((r) => r.indexdef)).toEqual([expect.stringContaining('(task_id, transaction_id, global_position)')]);
    } finally {
      await db.close();
    }
  });
});

describe('ensureDatabase', () => {
  test('several at once for a database that does not exist (two `baton up`s on a fresh machine): one creates it, the rest find it, none fails', async ({ pg }) => {
    const url = new URL(pg.url);
    url.pathname = `/${pg.name}_race`;
    try {
      const created = await Promise.all([1, 2, 3, 4].map(() => ensureDatabase(url.toString())));
      expect(created.filter(Boolean)).toHaveLength(1);
      expect(await ensureDatabase(url.toString())).toBe(false);
    } finally {
      await pg.db.pool.query(`drop database if exists "${pg.name}_race"`);
    }
  });
});

describe('schemaReady (the services\' readiness)', () => {
  test('ready on a migrated database; not ready, naming what is missing and how to apply it, on an empty one or one a migration behind', async ({ pg }) => {
    await expect(schemaReady(pg.db.pool)()).resolves.toBeUndefined();
    const url = new URL(pg.url);
    url.pathname = `/${pg.name}_empty`;
    await ensureDatabase(url.toString());
    const empty = createDb(url.toString());
    try {
      await expect(schemaReady(empty.pool)()).rejects.toThrow(SchemaNotReadyError);
      await expect(schemaReady(empty.pool)()).rejects.toThrow(/^no migration applied to this database: run the migrations first \(infra\/baton up does; a deployment runs node packages\/db\/src\/migrate-cli\.ts/);
    } finally {
      await empty.close();
      await pg.db.pool.query(`drop database if exists "${pg.name}_empty"`);
    }
    const last = (await pg.db.pool.query<{ name: string }>('select name from kysely_migration order by name desc limit 1')).rows[0]!.name;
    await pg.db.pool.query('delete from kysely_migration where name = $1', [last]);
    await expect(schemaReady(pg.db.pool)()).rejects.toThrow(new RegExp(`^1 migration not applied \\(${last}\\): run the migrations first`));
  });
});

describe('claimNamespace', () => {
  test('the first namespace to claim a database owns it; claims at once by two namespaces agree on one owner (both had been told they owned it)', async ({ pg }) => {
    for (let round = 0; round < 20; round++) {
      await pg.db.pool.query('delete from deployment');
      const [a, b] = await Promise.all([claimNamespace(pg.db.pool, 'nsa'), claimNamespace(pg.db.pool, 'nsb')]);
      expect(a).toEqual(b);
      expect(['nsa', 'nsb']).toContain(a.namespace);
      expect(a.deployment).toMatch(/^[0-9a-f-]{36}$/);
    }
    const owner = await claimNamespace(pg.db.pool, 'nsc');
    expect(owner.namespace).not.toBe('nsc');
    // The deployment id (migration 023) stays what it was claimed with.
    expect(await claimNamespace(pg.db.pool, owner.namespace)).toEqual(owner);
  });

  test('on a schema older than this code (a worker started before the migrations) it says to run them — it had said "column deployment_id does not exist", retried for ever', async ({ pg: { url } }) => {
    const db = createDb(url, { max: 1 });
    try {
      expect((await new Migrator({ db: db.kysely, provider: migrationProvider }).migrateTo('022_given_up_deliveries')).error).toBeUndefined();
      const err = await claimNamespace(db.pool, '').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SchemaNotReadyError);
      expect((err as Error).message).toMatch(/^this database's schema is older than this code: run the migrations first \(infra\/baton up does;/);
    } finally {
      await db.close();
    }
  });
});

describe('withSessionLock', () => {
  test("callers of one name run one at a time, and their waiting holds no client of the pool: more waiters than the pool has clients, each needing a client of its own, all finish (they took the whole pool and the holder's work could not get one)", async ({ pg: { url } }) => {
    const db = createDb(url, { max: 3 });
    try {
      let inside = 0;
      let most = 0;
      const one = (i: number) =>
        withSessionLock(db.pool, 'baton.test', async () => {
          inside++;
          most = Math.max(most, inside);
          // The work uses the pool too (a fork copies files and writes its log through other clients).
          await db.pool.query('select pg_sleep(0.01)');
          inside--;
          return i;
        });
      expect(await Promise.all(Array.from({ length: 12 }, (_, i) => one(i)))).toEqual(Array.from({ length: 12 }, (_, i) => i));
      expect(most).toBe(1);
      // Callers of different names (forks under keys of their own) hold their locks beside the pool: as many as it has clients, and more, all finish.
      expect(await Promise.all(Array.from({ length: 12 }, (_, i) => withSessionLock(db.pool, `baton.test.${i}`, async () => (await db.pool.query('select $1::int as i', [i])).rows[0].i)))).toEqual(Array.from({ length: 12 }, (_, i) => i));
      // Nothing is left locked.
      expect((await db.pool.query(`select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`)).rows[0].n).toBe(0);
    } finally {
      await db.close();
    }
  });
});
