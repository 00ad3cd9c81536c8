import { randomBytes } from 'node:crypto';
import { createDb, type Db } from '@baton/db';
import { EventStore } from '@baton/event-store';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { inject, test as base } from 'vitest';
import { withDatabase } from './infra.ts';

export interface PgFixture {
  url: string;
  name: string;
  db: Db;
  store: EventStore;
}

/** A fresh, migrated database copied from the run's template; dropped after the test. */
export async function freshDatabase(): Promise<PgFixture & { drop: () => Promise<void> }> {
  const baseUrl = inject('databaseUrl');
  const name = `baton_t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${inject('templateDb')}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(baseUrl, name);
  const db = createDb(url, { max: 10 });
  return {
    url,
    name,
    db,
    store: new EventStore(db.pool),
    drop: async () => {
      await db.close();
      const a = new pg.Client({ connectionString: baseUrl });
      await a.connect();
      await a.query(`drop database if exists ${name} with (force)`).finally(() => a.end());
    },
  };
}

/** A namespace for NATS stream, subject and consumer names, unique to one test. */
export const newNamespace = (): string => `t${randomBytes(4).toString('hex')}`;

export interface NatsFixture {
  url: string;
  nc: NatsConnection;
  namespace: string;
}

export const pgTest = base.extend<{ pg: PgFixture }>({
  // biome-ignore lint: vitest fixture signature
  pg: async ({}, use) => {
    const f = await freshDatabase();
    await use(f);
    await f.drop();
  },
});

export const stackTest = pgTest.extend<{ nats: NatsFixture }>({
  nats: async ({}, use) => {
    const url = inject('natsUrl');
    const nc = await connect({ servers: url });
    const namespace = newNamespace();
    await use({ url, nc, namespace });
    await deleteNamespace(nc, namespace);
    await nc.drain();
  },
});

async function deleteNamespace(nc: NatsConnection, namespace: string): Promise<void> {
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const jsm = await jetstreamManager(nc);
  for await (const s of jsm.streams.list()) {
    if (s.config.name.endsWith(`_${namespace.toUpperCase()}`)) await jsm.streams.delete(s.config.name).catch(() => {});
  }
}
