import { testClient } from './pg-clients.ts';

/**
 * Where the tests find Postgres and NATS:
 * 1. DATABASE_URL / NATS_URL when set (CI sets them);
 * 2. otherwise testcontainers, when a Docker engine answers;
 * 3. otherwise the loopback services of a development machine (127.0.0.1:5432 / :4222).
 * If none answers, the run stops with a message saying what to start — integration tests
 * are never silently skipped.
 */
export interface TestInfra {
  databaseUrl: string;
  natsUrl: string;
  stop: () => Promise<void>;
}

const LOOPBACK_PG = 'postgres://postgres@127.0.0.1:5432/postgres';
const LOOPBACK_NATS = 'nats://127.0.0.1:4222';

export async function resolveInfra(log: (m: string) => void = console.log): Promise<TestInfra> {
  let databaseUrl = process.env.DATABASE_URL;
  let natsUrl = process.env.NATS_URL;
  const stops: (() => Promise<void>)[] = [];
  if (!databaseUrl || !natsUrl) {
    const docker = await dockerAnswers();
    if (docker) {
      if (!databaseUrl) {
        const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
        const c = await new PostgreSqlContainer('postgres:17-alpine').start();
        databaseUrl = c.getConnectionUri();
        stops.push(async () => void (await c.stop()));
        log(`[testing] Postgres from testcontainers at ${databaseUrl}`);
      }
      if (!natsUrl) {
        const { NatsContainer } = await import('@testcontainers/nats');
        const c = await new NatsContainer('nats:2.10-alpine').withJetStream().start();
        natsUrl = String(c.getConnectionOptions().servers);
        stops.push(async () => void (await c.stop()));
        log(`[testing] NATS from testcontainers at ${natsUrl}`);
      }
    } else {
      databaseUrl ??= LOOPBACK_PG;
      natsUrl ??= LOOPBACK_NATS;
      log(`[testing] no Docker engine; using loopback services ${databaseUrl} and ${natsUrl}`);
    }
  }
  await assertPostgres(databaseUrl);
  await assertNats(natsUrl);
  return { databaseUrl, natsUrl, stop: async () => { for (const s of stops) await s(); } };
}

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function assertPostgres(url: string): Promise<void> {
  const c = testClient(url, { connectionTimeoutMillis: 5000 });
  try {
    await c.connect();
    await c.query('select 1');
  } catch (err) {
    throw new Error(`Postgres is not reachable at ${url} (${(err as Error).message}). Start it (see README) or set DATABASE_URL.`, { cause: err });
  } finally {
    await c.end().catch(() => {});
  }
}

async function assertNats(url: string): Promise<void> {
  const { connect } = await import('@nats-io/transport-node');
  try {
    const nc = await connect({ servers: url, timeout: 5000 });
    await nc.close();
  } catch (err) {
    throw new Error(`NATS is not reachable at ${url} (${(err as Error).message}). Start nats-server -js (see README) or set NATS_URL.`, { cause: err });
  }
}

/** Replace the database name of a Postgres URL. */
export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}
