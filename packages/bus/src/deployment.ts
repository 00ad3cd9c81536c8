import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { NamedError } from '@baton/domain';
import { ConfigError, exitOnConfigError } from '@baton/runtime';
import type { BusNames } from './subjects.ts';

/**
 * One deployment per namespace. A database is one deployment (@baton/db's claimNamespace gives
 * its id); the streams its services make carry that id in their description. Two databases given
 * one BATON_NAMESPACE on one NATS server had shared streams and consumers — each one's runners
 * taking the other's jobs (a task not in its database: the job dropped), each one's orchestrator
 * the other's events — with every service ready. Now a service finding streams another deployment
 * made asks on `baton.deployment` whether any service of it answers (every service of a
 * deployment answers, the gateway too; asked three times): one does — it refuses
 * (`ForeignBusError`, exit 78); none does (that deployment is gone: its database dropped or made
 * anew) — it takes the streams over, deleting and re-creating them (what they held was the other
 * database's work; a stream lost is re-fed from this one's log, as after a bus wipe).
 */
const MARK = 'baton deployment ';

/** A stream's description for the deployment that made it. */
export const deploymentMark = (deployment: string): string => `${MARK}${deployment}`;

/** The deployment a stream's description names (null: none — made before migration 023, or not by a service). */
export const deploymentOf = (description: string | undefined): string | null => (description?.startsWith(MARK) ? description.slice(MARK.length) : null);

export class ForeignBusError extends NamedError {
  readonly stream: string;
  /** The deployment id the stream is marked with. */
  readonly theirs: string;
  constructor(stream: string, namespace: string, theirs: string, ours: string) {
    super(
      `NATS stream ${stream} (BATON_NAMESPACE ${namespace ? `'${namespace}'` : "'' (none set)"}) belongs to another deployment whose services are running: it was made for the database whose deployment id is ${theirs}, and DATABASE_URL's database has deployment id ${ours} (each database's is in its table deployment). Two databases on one namespace take each other's jobs and events (a job for a task not in the database is dropped): give each deployment its own BATON_NAMESPACE (or NATS server), or point this service at the database the others use.`,
    );
    this.stream = stream;
    this.theirs = theirs;
  }
}

/** Answer `baton.deployment` with this process's deployment id, for as long as the connection lives. */
export function serveDeployment(nc: NatsConnection, names: BusNames, deployment: string): Subscription {
  return nc.subscribe(names.deploymentSubject, { callback: (_err, msg) => void msg.respond(deployment) });
}

/**
 * Is `deployment` alive: does a service of it answer on `baton.deployment`, asked three times
 * over about three seconds? One unanswered ask is not enough to take its streams — its services
 * may be restarting, or reconnecting after a NATS restart.
 */
export async function deploymentAlive(nc: NatsConnection, names: BusNames, deployment: string, asks = 3, waitMs = 1000): Promise<boolean> {
  for (let i = 0; i < asks; i++) {
    if (await deploymentAnswers(nc, names, deployment, waitMs)) return true;
    if (i < asks - 1) await new Promise((r) => setTimeout(r, waitMs));
  }
  return false;
}

/** Does a service of `deployment` answer on `baton.deployment` within `waitMs`? */
export async function deploymentAnswers(nc: NatsConnection, names: BusNames, deployment: string, waitMs = 1000): Promise<boolean> {
  try {
    for await (const reply of await nc.requestMany(names.deploymentSubject, '', { strategy: 'timer', maxWait: waitMs })) if (reply.string() === deployment) return true;
  } catch (err) {
    // Nobody subscribed at all: the server says so at once.
    if ((err as { code?: string } | null)?.code === '503' || /no responders/i.test((err as Error).message)) return false;
    throw err;
  }
  return false;
}

/** What `ensureTopology` and `TopologyWatch` are given to keep to one deployment (part of `TopologyOptions`). */
export interface DeploymentGuard {
  /** This database's deployment id: marked on the streams made; a stream marked by another is not used. */
  deployment?: string;
  /** Whether a service of that deployment answers now: a stream of a deployment none answers for is taken over (absent: it never is). */
  ownerAnswers?: (deployment: string) => Promise<boolean>;
  /** Streams of a live deployment were found (at start: `setUpTopology`; later: a look of `TopologyWatch`). Absent: thrown, and logged by the watch. */
  onForeign?: (err: ForeignBusError) => void;
}

/**
 * A worker's guard, for its `TopologyOptions`: streams are marked with `deployment`, and this
 * process answers for it; streams of a deployment still running make the service exit 78 with
 * `ForeignBusError`'s words (at start, or when a look of its TopologyWatch finds them).
 */
export function deploymentGuard(service: string, nc: NatsConnection, names: BusNames, deployment: string): DeploymentGuard {
  serveDeployment(nc, names, deployment);
  return {
    deployment,
    ownerAnswers: (theirs) => deploymentAlive(nc, names, theirs),
    onForeign: (err) => exitOnConfigError(new ConfigError(service, [err.message])),
  };
}
