import { Kysely, PostgresDialect, sql } from 'kysely';
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

/** What `migrateToLatest` did: the migrations it applied, and those the database has that this code does not know (a newer release's). */
export interface MigrationOutcome {
  applied: string[];
  /** The schema is newer than this code (a release rolled back): nothing to do — every migration adds, so this code runs on it. */
  newer: string[];
}

/**
 * The database's migrations and this code's do not fit: some this code knows are missing while
 * the database has others it does not (migrated by another line of releases). No retry mends it.
 */
export class MigrationsMismatchError extends Error {
  constructor(unknown: string[], missing: string[]) {
    const lacks = missing.length > 0 ? ` and lacks ones it does (${missing.join(', ')})` : ", among those it knows (not after them)";
    super(`this database has migrations this code does not know (${unknown.join(', ')})${lacks}: it was migrated by another line of releases; run the release that made it, or restore a backup from before`);
    this.name = new.target.name;
  }
}

/** The migrations this code knows, in order. */
const KNOWN_MIGRATIONS: readonly string[] = Object.keys(migrations).sort();

/** The migrations applied to a database (kysely's table), or null when none ever was (no table). */
async function appliedMigrations(query: (text: string) => Promise<{ rows: { name: string }[] }>): Promise<Set<string> | null> {
  return query('select name from kysely_migration').then(
    (r) => new Set(r.rows.map((x) => x.name)),
    (err: { code?: string }) => {
      if (err.code === '42P01') return null;
      throw err;
    },
  );
}

/**
 * Apply every pending migration (idempotent; concurrent callers are serialised by kysely's lock).
 * A database already past this code (every migration it knows applied, and later ones too: the
 * code rolled back) is left as it is — kysely had called that "corrupted migrations", and a
 * rollback the docs call fine was refused.
 */
export async function migrateToLatest(kysely: Kysely<Database>): Promise<MigrationOutcome> {
  const done = (await appliedMigrations((text) => sql.raw<{ name: string }>(text).execute(kysely))) ?? new Set<string>();
  const unknown = [...done].filter((m) => !KNOWN_MIGRATIONS.includes(m)).sort();
  if (unknown.length > 0) {
    const missing = KNOWN_MIGRATIONS.filter((m) => !done.has(m));
    // Ordered by their number (a name's leading digits), not as text: 1000_ comes after 999_.
    const number = (m: string): number => Number.parseInt(m, 10);
    const last = number(KNOWN_MIGRATIONS.at(-1) ?? '0');
    if (missing.length === 0 && unknown.every((m) => number(m) > last)) return { applied: [], newer: unknown };
    throw new MigrationsMismatchError(unknown, missing);
  }
  const migrator = new Migrator({ db: kysely, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName), newer: [] };
}

/**
 * SQLSTATEs a migration run waits out: a server not (yet) reachable or accepting (08, 57P0x, too
 * many connections, the database not there yet), or a statement that lost a race another run
 * may win (40: serialization failure, deadlock; 55P03: a lock not available). Others are the
 * statement's own.
 */
const TRANSIENT_SQLSTATE = /^(08|57P0|40|53300$|3D000$|55P03$)/;

/**
 * Whether a failure of `migrateToLatest` is for good — the migrations do not fit, or a statement
 * failed in a server that answers (a migration's own error) — not a server still starting: a
 * migration run stops at once and says it, instead of "Postgres not ready" for a minute.
 */
export function migrationFailedForGood(err: unknown): boolean {
  if (err instanceof MigrationsMismatchError) return true;
  return err instanceof pg.DatabaseError && !TRANSIENT_SQLSTATE.test(err.code ?? '');
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
    const done = await appliedMigrations((text) => pool.query<{ name: string }>(text));
    if (done === null) throw new SchemaNotReadyError(`no migration applied to this database: ${HOW_TO_MIGRATE}`);
    const missing = KNOWN_MIGRATIONS.filter((m) => !done.has(m));
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
  // A schema older than this code (a worker started before the migrations): said so, not "column deployment_id does not exist".
  const behind = (err: { code?: string }): never => {
    if (err.code === '42P01' || err.code === '42703') throw new SchemaNotReadyError(`this database's schema is older than this code: ${HOW_TO_MIGRATE}`);
    throw err;
  };
  const claimed = await pool.query<DeploymentClaim>(`insert into deployment (namespace) values ($1) on conflict (id) do nothing returning namespace, deployment_id as deployment`, [namespace]).catch(behind);
  if (claimed.rows[0]) return claimed.rows[0];
  // Claimed already — perhaps by a claim that committed while this one waited on it: read in a
  // statement of its own, which sees that commit (the insert's snapshot did not).
  const { rows } = await pool.query<DeploymentClaim>('select namespace, deployment_id as deployment from deployment where id = 1');
  if (!rows[0]) throw new Error('the deployment row is claimed and yet not there');
  return rows[0];
}

