import { Kysely, PostgresDialect } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { migrationProvider } from './migrations/index.ts';
import type { Database } from './schema.ts';

export interface Db {
  pool: pg.Pool;
  kysely: Kysely<Database>;
  /**
   * Statements this Db has sent to Postgres (with `countQueries`; 0 otherwise): every client of
   * its pool counts, so dedicated sessions taken from it (the relay's) are included. What
   * `baton bench` M4 reads through a service's diagnostics.
   */
  queriesIssued(): number;
  close(): Promise<void>;
}

export interface DbOptions {
  max?: number;
  applicationName?: string;
  /** Count every statement sent through this pool (`queriesIssued()`). */
  countQueries?: boolean;
}

export function createDb(connectionString: string, opts: DbOptions = {}): Db {
  let queries = 0;
  // The pool makes its clients from this class: a pg.Client whose every query is counted.
  class CountingClient extends pg.Client {
    override query(...args: unknown[]): never {
      queries++;
      return (super.query as (...a: unknown[]) => never)(...args);
    }
  }
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'baton',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    ...(opts.countQueries ? { Client: CountingClient as unknown as new () => pg.ClientBase } : {}),
  });
  // An idle client that loses its server (restart, network) must not crash the process.
  pool.on('error', () => {});
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    pool,
    kysely,
    queriesIssued: () => queries,
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
