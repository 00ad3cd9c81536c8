import { cutText } from '@baton/domain';
import { WATCH_SINCE_LAG_S } from '@baton/db';
import type pg from 'pg';

type Db = Pick<pg.Pool, 'query'>;

/**
 * Agent leases (table `agent_leases`, one row per task and agent). A runner takes the lease
 * before it claims an attempt in the log and renews it while it works; a live lease held by
 * someone else means "this agent is being run": a second delivery of its job is dropped. An
 * expired lease (its runner died or hung) may be taken by anyone. The watchdog notes each
 * re-dispatch it makes in the same row (`fires`), so it can give up after a few.
 */
export interface Lease {
  taskId: string;
  agentId: string;
  attempt: number;
  holder: string;
  expiresAt: Date;
  fires: number;
  /**
   * Why the agent's last lease was lost (a runner stopped, a sandbox would not start): kept when
   * the next holder takes the lease, so the watchdog can name it if that attempt is lost too — or
   * if it gives the agent up while a new runner is just taking it.
   */
  lastError: string | null;
}

/** The holder the watchdog writes when it re-dispatches an agent (its lease is expired at once: anyone may take it). */
export const WATCHDOG_HOLDER = 'baton:watchdog';

/**
 * Take the agent's lease for `attempt` unless another holder's lease is still live. Returns
 * null when it is held elsewhere (with that lease), or the lease taken.
 */
export async function acquireLease(db: Db, l: { taskId: string; agentId: string; attempt: number; holder: string; ttlMs: number }): Promise<{ taken: true } | { taken: false; heldBy: Lease }> {
  const r = await db.query(
    `insert into agent_leases as l (task_id, agent_id, attempt, holder, expires_at)
     values ($1, $2, $3, $4, now() + make_interval(secs => $5::double precision / 1000))
     on conflict (task_id, agent_id) do update set attempt = excluded.attempt, holder = excluded.holder, expires_at = excluded.expires_at,
       fires = 0, updated_at = now()
     where l.expires_at <= now() or l.holder = excluded.holder
     returning 1`,
    [l.taskId, l.agentId, l.attempt, l.holder, l.ttlMs],
  );
  if (r.rowCount) return { taken: true };
  const held = await leaseOf(db, l.taskId, l.agentId);
  // Released between the two statements: try once more.
  if (!held) return acquireLease(db, l);
  return { taken: false, heldBy: held };
}

/** Extend a lease this holder still has; false when it lost it (expired and taken by another). */
export async function renewLease(db: Db, l: { taskId: string; agentId: string; holder: string; ttlMs: number }): Promise<boolean> {
  const r = await db.query(
    `update agent_leases set expires_at = now() + make_interval(secs => $4::double precision / 1000), updated_at = now()
     where task_id = $1 and agent_id = $2 and holder = $3`,
    [l.taskId, l.agentId, l.holder, l.ttlMs],
  );
  return (r.rowCount ?? 0) > 0;
}

/** Give a lease back (the job ended). A failed job leaves its error for the watchdog's report. */
export async function releaseLease(db: Db, l: { taskId: string; agentId: string; holder: string; error?: string; holdMs?: number }): Promise<void> {
  if (l.error !== undefined) {
    // Failed: the error kept for the watchdog's words; the lease ends now, or after `holdMs` (a retry is due).
    await db.query(
      `update agent_leases set expires_at = now() + make_interval(secs => $5::double precision / 1000), last_error = $4, updated_at = now() where task_id = $1 and agent_id = $2 and holder = $3`,
      [l.taskId, l.agentId, l.holder, cutText(l.error, 2000), l.holdMs ?? 0],
    );
    return;
  }
  await db.query('delete from agent_leases where task_id = $1 and agent_id = $2 and holder = $3', [l.taskId, l.agentId, l.holder]);
}

/** The holders of leases still live (runners at work, or dead ones whose leases have not run out yet). */
export async function liveLeaseHolders(db: Db): Promise<string[]> {
  const r = await db.query<{ holder: string }>(`select distinct holder from agent_leases where expires_at > now() and holder <> '${WATCHDOG_HOLDER}' order by holder`);
  return r.rows.map((x) => x.holder);
}

/**
 * Expire at once the live leases of holders known to be gone (a runner that restarted found its
 * predecessor's), so the watchdog re-dispatches their agents at its next look instead of after
 * the lease's TTL; `reason` is left as the lease's last error. Returns the leases expired.
 */
export async function expireLeasesOf(db: Db, holders: readonly string[], reason: string): Promise<{ taskId: string; agentId: string; holder: string }[]> {
  if (holders.length === 0) return [];
  const r = await db.query<{ task_id: string; agent_id: string; holder: string }>(
    `update agent_leases set expires_at = now(), last_error = $2, updated_at = now()
     where holder = any($1::text[]) and expires_at > now() returning task_id, agent_id, holder`,
    [holders, cutText(reason, 2000)],
  );
  return r.rows.map((x) => ({ taskId: x.task_id, agentId: x.agent_id, holder: x.holder }));
}

export async function leaseOf(db: Db, taskId: string, agentId: string): Promise<Lease | null> {
  const r = await db.query<LeaseRow>('select * from agent_leases where task_id = $1 and agent_id = $2', [taskId, agentId]);
  return r.rows[0] ? toLease(r.rows[0]) : null;
}

export async function leasesOfTask(db: Db, taskId: string): Promise<Lease[]> {
  const r = await db.query<LeaseRow>('select * from agent_leases where task_id = $1', [taskId]);
  return r.rows.map(toLease);
}

/**
 * The watchdog re-dispatched the agent: the row says so (expired at once, so the next runner
 * takes it; `fires` counts re-dispatches of this attempt that `count`: those made while no job
 * waited in the queue — one made while runners were busy or away proves nothing about the agent).
 */
export async function noteRedispatch(db: Db, taskId: string, agentId: string, attempt: number, count = true): Promise<number> {
  const add = count ? 1 : 0;
  const r = await db.query<{ fires: number }>(
    `insert into agent_leases as l (task_id, agent_id, attempt, holder, expires_at, fires)
     values ($1, $2, $3, '${WATCHDOG_HOLDER}', now(), $4)
     on conflict (task_id, agent_id) do update set
       fires = case when l.attempt = excluded.attempt then l.fires + $4 else $4 end,
       attempt = excluded.attempt, holder = excluded.holder, expires_at = now(), updated_at = now()
     returning fires`,
    [taskId, agentId, attempt, add],
  );
  return r.rows[0]?.fires ?? 1;
}

export async function dropLeases(db: Db, taskId: string, agentIds?: readonly string[]): Promise<void> {
  if (agentIds) await db.query('delete from agent_leases where task_id = $1 and agent_id = any($2::text[])', [taskId, agentIds]);
  else await db.query('delete from agent_leases where task_id = $1', [taskId]);
}

/** A task the watchdog should look at, and when a runner's lease of one of its agents ran out or was handed back (null: none did). */
export interface WatchCandidate {
  id: string;
  leaseLostAt: Date | null;
}

/**
 * Tasks the watchdog should look at: work no person holds and no transition for `graceMs` (and
 * WATCH_SINCE_LAG_S, the column's own lag), or a lease that has expired. Oldest first. A runner's
 * lease that ran out (or was handed back) says when (`leaseLostAt`): news the watchdog acts on
 * even if it looked at the task a moment before; its own re-dispatch marks (WATCHDOG_HOLDER) are not.
 */
export async function watchCandidates(db: Db, graceMs: number, limit = 200): Promise<WatchCandidate[]> {
  const r = await db.query<{ id: string; lost: Date | null }>(
    `select id, max(lost) as lost from (
       select id, watch_since as since, null::timestamptz as lost from tasks where watch_since < now() - make_interval(secs => $1::double precision / 1000 + ${WATCH_SINCE_LAG_S})
       union all
       select task_id as id, expires_at as since, case when holder <> '${WATCHDOG_HOLDER}' then expires_at end as lost from agent_leases where expires_at < now()
     ) c group by id order by min(since) limit $2`,
    [graceMs, limit],
  );
  return r.rows.map((x) => ({ id: x.id, leaseLostAt: x.lost }));
}

/** Every task that is not final (what the bus may have lost wake-ups for), oldest first. */
export async function unfinishedTasks(db: Db, afterId: string | null, limit = 500): Promise<string[]> {
  const r = await db.query<{ id: string }>(
    `select id from tasks where status not in ('completed', 'failed', 'cancelled') and ($1::uuid is null or id > $1::uuid) order by id limit $2`,
    [afterId, limit],
  );
  return r.rows.map((x) => x.id);
}

interface LeaseRow {
  task_id: string;
  agent_id: string;
  attempt: number;
  holder: string;
  expires_at: Date;
  fires: number;
  last_error: string | null;
}

function toLease(r: LeaseRow): Lease {
  return { taskId: r.task_id, agentId: r.agent_id, attempt: r.attempt, holder: r.holder, expiresAt: r.expires_at, fires: r.fires, lastError: r.last_error };
}

/** The creation time JetStream reports for each stream, as last recorded (what the log was relayed into). */
export async function recordedStreams(db: Db): Promise<Map<string, string>> {
  const r = await db.query<{ name: string; created: string }>('select name, created from bus_streams');
  return new Map(r.rows.map((x) => [x.name, x.created]));
}

export async function recordStream(db: Db, name: string, created: string): Promise<void> {
  await db.query(`insert into bus_streams (name, created) values ($1, $2) on conflict (name) do update set created = excluded.created, seen_at = now()`, [name, created]);
}
