import { Kysely, PostgresDialect } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { restoredLogProblem } from './restored-log.ts';
import { migrationProvider, migrations } from './migrations/index.ts';
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
  /** Where a lost connection is reported (a pino logger will do); default: not reported. */
  log?: DbLog;
}

export interface DbLog {
  warn(obj: object, msg: string): void;
}

/** Report connection losses at most this often (a pool of six sees six, or twelve, errors per outage). */
const REPORT_EVERY_MS = 5000;

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
    max: opts.max ?? 6, // as PG_POOL_MAX's default
    application_name: opts.applicationName ?? 'baton',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    // A server that vanished without closing the socket (a network drop) is noticed too.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(opts.countQueries ? { Client: CountingClient as unknown as new () => pg.ClientBase } : {}),
  });
  // A client that loses its server (Postgres restarted or stopped, the network) emits 'error';
  // with no listener that would kill the process. The pool listens to its idle clients only, so
  // every client gets a listener of its own for its whole life — also while checked out (kysely
  // and inTransaction hold one for a query or a transaction; the relay for its session). The
  // statement in flight fails and its caller retries; a client that failed is not queryable and
  // the pool drops it on release, so the next use connects afresh.
  let quietUntil = 0;
  let suppressed = 0;
  const lost = (err: Error): void => {
    const now = Date.now();
    if (now < quietUntil) {
      suppressed++;
      return;
    }
    quietUntil = now + REPORT_EVERY_MS;
    opts.log?.warn({ err: err.message, code: (err as { code?: string }).code, similarBefore: suppressed }, 'Postgres connection lost; the pool reconnects on next use');
    suppressed = 0;
  };
  pool.on('connect', (client) => client.on('error', lost));
  pool.on('error', () => {}); // idle clients: already reported by their own listener
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

/** Postgres answers, but this database lacks migrations the code needs. */
export class SchemaNotReadyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** How to apply the migrations, as a service's readiness says it. */
const HOW_TO_MIGRATE = 'run the migrations first (infra/baton up does; a deployment runs node packages/db/src/migrate-cli.ts, or the wait-for-migrations init container)';

/**
 * A readiness check: Postgres answers, every migration this code knows is applied and the log is
 * not one restored from another server and not yet renumbered (`restoredLogProblem`). A service
 * started before its migrations then reports not ready, naming what is missing, instead of ready
 * with every request failing on a table that is not there. Once all are applied it is only a
 * `select 1` (migrations are not undone under a running service).
 */
export function schemaReady(pool: Pick<pg.Pool, 'query'>): () => Promise<void> {
  let applied = false;
  return async () => {
    if (applied) {
      await pool.query('select 1');
      return;
    }
    const known = Object.keys(migrations).sort();
    const rows = await pool.query<{ name: string }>('select name from kysely_migration').then(
      (r) => r.rows,
      (err: { code?: string }) => {
        if (err.code === '42P01') throw new SchemaNotReadyError(`no migration applied to this database: ${HOW_TO_MIGRATE}`);
        throw err;
      },
    );
    const done = new Set(rows.map((r) => r.name));
    const missing = known.filter((m) => !done.has(m));
    if (missing.length > 0) throw new SchemaNotReadyError(`${missing.length} migration${missing.length === 1 ? '' : 's'} not applied (${missing.join(', ')}): ${HOW_TO_MIGRATE}`);
    const restored = await restoredLogProblem(pool);
    if (restored) throw new SchemaNotReadyError(restored);
    applied = true;
  };
}

/** Who owns a database: its namespace (BATON_NAMESPACE) and its deployment id (migration 023). */
export interface DeploymentClaim {
  namespace: string;
  deployment: string;
}

/**
 * Claim this database for a namespace (BATON_NAMESPACE): the first to ask owns it. Returns the
 * owner — this namespace, or the one that claimed it first (then the caller must not run on it:
 * `holdNamespace` in @baton/runtime) — and the database's deployment id, which its services
 * write on the NATS streams they make (`ensureTopology` in @baton/bus).
 */
export async function claimNamespace(pool: Pick<pg.Pool, 'query'>, namespace: string): Promise<DeploymentClaim> {
  const claimed = await pool.query<DeploymentClaim>(`insert into deployment (namespace) values ($1) on conflict (id) do nothing returning namespace, deployment_id as deployment`, [namespace]);
  if (claimed.rows[0]) return claimed.rows[0];
  // Claimed already — perhaps by a claim that committed while this one waited on it: read in a
  // statement of its own, which sees that commit (the insert's snapshot did not).
  const { rows } = await pool.query<DeploymentClaim>('select namespace, deployment_id as deployment from deployment where id = 1');
  if (!rows[0]) throw new Error('the deployment row is claimed and yet not there');
  return rows[0];
}

