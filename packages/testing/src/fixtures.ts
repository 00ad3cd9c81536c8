import { randomBytes } from 'node:crypto';
import { createDb, type Db } from '@baton/db';
import { EventStore } from '@baton/event-store';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { inject, test as base } from 'vitest';
import { withDatabase } from './infra.ts';
import { testClient } from './pg-clients.ts';
import { deleteNamespace } from './namespaces.ts';

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
  const admin = testClient(baseUrl);
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
      const a = testClient(baseUrl);
      await a.connect();
      await a.query(`drop database if exists ${name} with (force)`).finally(() => a.end());
    },
  };
}

/**
 * A namespace for NATS stream, subject and consumer names, unique to one test: `t` + the run's
 * id + 6 random hex digits, so the run's global teardown can tell its own namespaces (and check
 * none was left behind). Whoever takes one deletes its streams when done: deleteNamespace.
 */
export const newNamespace = (): string => `t${runIdOrEmpty()}${randomBytes(3).toString('hex')}`;

function runIdOrEmpty(): string {
  try {
    return inject('runId') ?? '';
  } catch {
    return ''; // outside a vitest worker of a project with the global setup
  }
}

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
