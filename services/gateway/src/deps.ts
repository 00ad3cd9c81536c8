import type { StreamingModel, TeamCatalog, TeamDefinition } from '@baton/agents';
import type { BusNames } from '@baton/bus';
import type { MailRecipientRules, NotifyConfig } from '@baton/domain';
import type { Database } from '@baton/db';
import type { EventStore, TaskLoader } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import type { WorkspaceLimits } from '@baton/storage';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Kysely } from 'kysely';
import type { ApiKeys } from './api-keys.ts';
import type pg from 'pg';
import type { Context, GatewayMetrics, Span } from '@baton/telemetry';
import type { SseHub } from './sse-hub.ts';
import type { TaskTenants } from './task-tenants.ts';

export interface GatewayDeps {
  pool: pg.Pool;
  kysely: Kysely<Database>;
  store: EventStore;
  /** Loads a task (a TaskCache's incremental load in the service). */
  load: TaskLoader;
  names: BusNames;
  /** Null until NATS is reachable; the gateway serves (and /readyz says 503) meanwhile. */
  nats: () => NatsConnection | null;
  /** This database's deployment id once claimed (null before; absent: not checked): streams another deployment made show on /readyz. */
  deployment?: () => string | null;
  hub: SseHub;
  /** Tenants of tasks seen here (event streams check visibility against it first). */
  tenants: TaskTenants;
  teams: Readonly<Record<string, TeamDefinition>>;
  /** The team of a task or chat that names none (`defaultTeamOf`: configured, or null: one must be named). */
  defaultTeam: string | null;
  /** `teams` and every version the services recorded (team_configs): a task's pinned configuration, wherever it was loaded. */
  catalog: TeamCatalog;
  /**
   * Records this gateway's team configurations (team_configs) — once it has succeeded, at once. A
   * task is accepted only after (it names its version, which an orchestrator that has not loaded
   * it reads from there).
   */
  teamsRecorded: () => Promise<void>;
  /** The keys requests are checked against (`fixedApiKeys`, or a keys file read again as it changes). */
  apiKeys: ApiKeys;
  /** Without API keys, the host names (besides localhost and IP addresses) the API answers at (OPEN_API_HOSTS). */
  openApiHosts?: readonly string[];
  log: Logger;
  metrics: GatewayMetrics;
  now: () => Date;
  newId: () => string;
  sseHeartbeatMs: number;
  /** Request bodies in general; POST /v1/tasks also allows a base64 archive of workspaceLimits.maxArchiveBytes. */
  bodyLimit: number;
  /** Example projects (`<dir>/<name>/`) a task can start from. */
  examplesDir: string;
  workspaceLimits: WorkspaceLimits;
  limits: GatewayLimits;
  /** Webhook URLs may name loopback/private/link-local addresses (development). */
  allowPrivateWebhooks: boolean;
  /** Default budgets by tenant ("*": any other tenant); absent: none. */
  budgets?: TenantBudgets;
  /** Default mail recipients by tenant ("*": any other tenant); absent: none (docs/email.md). */
  notify?: Readonly<Record<string, NotifyConfig>>;
  /** Where each tenant's mail may go (MAIL_ALLOWED_RECIPIENTS); absent: anywhere. */
  mailRecipients?: MailRecipientRules | undefined;
  /** Checks mailed decision links (the notifier's MAIL_LINK_SECRET); absent: the /mail pages say links are off. */
  mailLinkSecret?: string;
  /** Chat mode's model (docs/chat.md); absent: the offline chat model. */
  chatModel?: StreamingModel;
  /** A chat reply's max_tokens (default 2048). */
  chatMaxTokens?: number;
  /**
   * Bulk transfers — a workspace upload, a fork's copy, an artifact download — go through this:
   * each holds a pool connection for as long as its data takes, so at most `bulkLimit(pool size)`
   * run at once and the rest wait their turn, leaving the other requests connections of their own.
   */
  bulk: <T>(fn: () => Promise<T>) => Promise<T>;
}

/** How many bulk transfers may hold a connection at once: all but two of the pool's (at least one). */
export const bulkLimit = (poolMax: number): number => Math.max(1, poolMax - 2);

/** A tenant's default from a map by tenant name: its own entry, else "*" (every tenant not named). */
export const tenantDefault = <T>(byTenant: Readonly<Record<string, T>> | undefined, tenant: string): T | undefined => byTenant?.[tenant] ?? byTenant?.['*'];

/** Default spending limits by tenant name; "*" applies to every tenant not named. */
export type TenantBudgets = Readonly<Record<string, { usd?: number | undefined; tokens?: number | undefined }>>;

/** Per gateway replica: writes per tenant (a token bucket), open SSE streams per tenant and in all. */
export interface GatewayLimits {
  /** Tokens added per second; 0: writes are not limited. */
  writesPerS: number;
  burst: number;
  ssePerTenant: number;
  sseConnections: number;
  /** `GET /v1/tasks?stuck=true` and the stuck gauge: no transition for this long (and nobody holding a live lease). */
  stuckAfterMs: number;
  /**
   * An SSE client that takes nothing of what its stream has to send for this long (its socket
   * does not drain) is cut: it held a stream slot, and what was written for it piled up in memory.
   */
  sseStallMs: number;
}

export const DEFAULT_LIMITS: GatewayLimits = { writesPerS: 50, burst: 100, ssePerTenant: 100, sseConnections: 1000, stuckAfterMs: 120_000, sseStallMs: 60_000 };

/** A workspace archive sent as the multipart form's `workspace` file part. */
export interface WorkspaceUpload {
  archive: Buffer;
  /** The part's file name, if it had one. */
  name: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    tenant: string;
    actor: string;
    /** POST /v1/tasks as multipart/form-data: the uploaded archive (null otherwise). */
    workspaceUpload: WorkspaceUpload | null;
    /** The request's server span and when it started (see app.ts). */
    trace: { span: Span | null; context: Context | null; startedAt: number };
  }
}
