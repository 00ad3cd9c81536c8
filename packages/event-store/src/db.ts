import { Kysely, PostgresDialect } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { migrationProvider } from './migrations/index.ts';
import type { Database } from './schema.ts';

export interface Db {
  pool: pg.Pool;
  kysely: Kysely<Database>;
  close(): Promise<void>;
}

// Every statement this process sends to Postgres, counted where they all pass (pool queries,
// and dedicated sessions like the relay's): the figure `baton bench` M4 reads while idle.
let queries = 0;
const clientProto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; batonCounted?: true };
if (!clientProto.batonCounted) {
  const query = clientProto.query;
  clientProto.query = function (this: unknown, ...args: unknown[]) {
    queries++;
    return query.apply(this, args);
  };
  clientProto.batonCounted = true;
}
/** Statements sent to Postgres by this process since it started. */
export const queriesIssued = (): number => queries;

export function createDb(connectionString: string, opts: { max?: number; applicationName?: string } = {}): Db {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'baton',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client that loses its server (restart, network) must not crash the process.
  pool.on('error', () => {});
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    pool,
    kysely,
    async close() {
      await kysely.destroy();
    },
  };
}

/** Apply every pending migration (idempotent; concurrent callers are serialised by kysely's lock). */
export async function migrateToLatest(kysely: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db: kysely, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
