import { expireLeasesOf, liveLeaseHolders } from '@baton/storage';
import type { Logger } from '@baton/runtime';
import type pg from 'pg';

/** Who this runner process is: its lease holder id, whether RUNNER_ID named it, the host it runs on. */
export interface RunnerIdentity {
  runnerId: string;
  /** RUNNER_ID was set: the id outlives the process (a restart under it is this runner again). */
  explicit: boolean;
  host: string;
}

/** The id a runner takes when RUNNER_ID is not set. */
export const defaultRunnerId = (host: string, pid: number): string => `${host}-${pid}`;

/**
 * Is `holder` an earlier process of this runner, which cannot be at work any more? (Pure.)
 * - Under RUNNER_ID (unique per running runner, e.g. a pod's name): the same id — a process that
 *   just started holds nothing yet, so a live lease under its id is its predecessor's.
 * - Under the default id (`host-pid`): the same id (a container restarted with the same pid), or
 *   an id of this host whose process is gone (the supervisor restarted it with a new pid). A
 *   process of this host that is still alive (another runner beside this one) is not touched.
 */
export function isPredecessor(holder: string, self: RunnerIdentity, alive: (pid: number) => boolean): boolean {
  if (holder === self.runnerId) return true;
  if (self.explicit || !holder.startsWith(`${self.host}-`)) return false;
  const pid = holder.slice(self.host.length + 1);
  return /^[1-9]\d*$/.test(pid) && !alive(Number(pid));
}

/** Whether a process with this pid runs on this host (EPERM: it does, as another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * At start-up: the agents an earlier process of this runner was running when it died (crash, OOM,
 * SIGKILL) are handed back at once — their leases expired, so the watchdog re-dispatches them at
 * its next look (WATCHDOG_INTERVAL_MS) instead of after LEASE_TTL_MS. Returns how many.
 */
export async function handBackPredecessors(db: Pick<pg.Pool, 'query'>, self: RunnerIdentity, log: Logger, alive: (pid: number) => boolean = pidAlive): Promise<number> {
  const gone = (await liveLeaseHolders(db)).filter((h) => isPredecessor(h, self, alive));
  if (gone.length === 0) return 0;
  const expired = await expireLeasesOf(db, gone, `runner ${gone.join(', ')} stopped while running this agent (${self.runnerId} started in its place)`);
  log.warn({ predecessors: gone, agents: expired.map((e) => `${e.taskId}/${e.agentId}`) }, 'handed back the agents of an earlier runner process that stopped; the watchdog re-dispatches them');
  return expired.length;
}
