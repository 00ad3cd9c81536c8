import { fold } from '@baton/domain';
import { sql, type Kysely } from 'kysely';
import { WATCH_SINCE_LAG_S, type Database } from '@baton/db';
import { storableJson } from './append.ts';
import type { EventStore } from './store.ts';
import { toTaskRow } from './task-row.ts';
import type { PendingRequestView, TaskListItem } from '@baton/api';
import type pg from 'pg';
import { cursorTime, decodeCursor, encodeCursor } from './cursor.ts';


export interface TaskPage {
  items: TaskListItem[];
  nextCursor: string | null;
}

/** Keyset pagination over the tasks read model, newest first. */
export async function listTasks(db: Kysely<Database>, q: { tenantId: string; status?: string | undefined; team?: string | undefined; /** Text the listed prompt contains, ignoring case. */ search?: string | undefined; limit: number; cursor?: string | undefined; stuckAfterMs?: number | undefined; /** ISO 8601: only tasks whose last change is later. */ updatedAfter?: string | undefined; /** Only these tasks. */ ids?: readonly string[] | undefined; /** Only the forks of this task. */ forkedFrom?: string | undefined }): Promise<TaskPage> {
  let query = db.selectFrom('tasks').selectAll().select(sql.raw<string>(cursorTime('created_at')).as('cursor_at')).where('tenant_id', '=', q.tenantId);
  if (q.forkedFrom) query = query.where('forked_from', '=', q.forkedFrom);
  if (q.ids) query = q.ids.length > 0 ? query.where('id', 'in', [...q.ids]) : query.where(sql<boolean>`false`);
  if (q.status) query = query.where('status', '=', q.status);
  if (q.team) query = query.where('team', '=', q.team);
  // The listed prompt (`title`, its first 200 characters) contains the text: LIKE's own characters are escaped, so they match themselves.
  if (q.search) query = query.where('title', 'ilike', `%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  if (q.updatedAfter) query = query.where('updated_at', '>', new Date(q.updatedAfter));
  if (q.stuckAfterMs !== undefined) query = query.where(stuck(q.stuckAfterMs));
  if (q.cursor) {
    const { at, id } = decodeCursor(q.cursor);
    query = query.where(sql<boolean>`(created_at, id) < (${at}::timestamptz, ${id}::uuid)`);
  }
  const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(q.limit + 1).execute();
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const forkedAt = await forkVersions(db, page);
  return {
    items: page.map((r) => ({
      id: r.id,
      status: r.status,
      prompt: r.title,
      team: r.team,
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
      version: r.version,
      pendingRequests: r.pending_requests as PendingRequestView[],
      forkedFrom: r.forked_from ? { taskId: r.forked_from, atVersion: r.forked_at_version ?? forkedAt.get(r.id) ?? 0 } : null,
    })),
    nextCursor: rows.length > q.limit && last ? encodeCursor(last.cursor_at, last.id) : null,
  };
}

/**
 * The version each fork among `rows` was copied at, where its row does not say: a fork made by a
 * gateway of the release before migration 020 while this one ran (a rolling update) was written
 * without it, and later appends do not touch the column. Read from the fork's first event and
 * kept in its row — once: such rows are few, and only a rolling update makes them.
 */
async function forkVersions(db: Kysely<Database>, rows: readonly { id: string; forked_from: string | null; forked_at_version: number | null }[]): Promise<Map<string, number>> {
  const unknown = rows.filter((r) => r.forked_from !== null && r.forked_at_version === null).map((r) => r.id);
  if (unknown.length === 0) return new Map();
  const { rows: repaired } = await sql<{ id: string; forked_at_version: number }>`
    update tasks t set forked_at_version = (e.data->'forkedFrom'->>'atVersion')::int
    from events e
    where t.id = any(${unknown}::uuid[]) and t.forked_at_version is null
      and e.stream_id = 'task-' || t.id::text and e.stream_version = 1 and jsonb_typeof(e.data->'forkedFrom') = 'object'
    returning t.id, t.forked_at_version`.execute(db);
  return new Map(repaired.map((r) => [r.id, r.forked_at_version]));
}

/**
 * Stuck: work no person holds (watch_since is set) with no transition for `afterMs` (plus the
 * column's own lag, WATCH_SINCE_LAG_S), and nobody
 * visibly working on it (no live agent lease). The watchdog acts on such tasks; this lists them.
 */
const stuck = (afterMs: number) =>
  sql<boolean>`watch_since < now() - make_interval(secs => ${afterMs / 1000 + WATCH_SINCE_LAG_S}) and not exists (select 1 from agent_leases l where l.task_id = tasks.id and l.expires_at > now())`;


/** Rebuild the `tasks` read model from the log (e.g. after changing its shape). Returns the number of tasks. */
export async function rebuildTasksReadModel(db: Kysely<Database>, store: EventStore): Promise<number> {
  const ids = await db.selectFrom('events').select('task_id').distinct().execute();
  await db.deleteFrom('tasks').execute();
  let n = 0;
  for (const { task_id } of ids) {
    const state = fold(await store.readTask(task_id));
    if (state.status === 'none') continue;
    const row = toTaskRow(state);
    await db.insertInto('tasks').values({ ...row, pending_requests: storableJson(row.pending_requests), next_deadline: row.next_deadline }).execute();
    n++;
  }
  return n;
}

/** Live tasks with an open request whose deadline is at or before `now`, earliest first. */
export async function dueTasks(pool: Pick<pg.Pool, 'query'>, now: Date, limit = 100): Promise<string[]> {
  const r = await pool.query<{ id: string }>('select id from tasks where next_deadline <= $1 order by next_deadline limit $2', [now, limit]);
  return r.rows.map((row) => row.id);
}

/** The earliest open-request deadline of any live task (null when nothing waits on a deadline). */
export async function earliestDeadline(pool: Pick<pg.Pool, 'query'>): Promise<Date | null> {
  const r = await pool.query<{ at: Date | null }>('select min(next_deadline) as at from tasks where next_deadline is not null');
  return r.rows[0]?.at ?? null;
}

/** What the gateway's task gauges show, read from the tasks read model in one statement when scraped. */
export interface TaskFigures {
  byStatus: Record<string, number>;
  /** Open requests by kind, with the age of the oldest (seconds). */
  openRequests: Record<string, { count: number; oldestS: number }>;
  stuck: number;
}

/**
 * Tasks by status, open requests by kind (and their oldest age) and stuck tasks. The counts scan
 * the tasks read model (one row per task; fine at a scrape every 15 s for up to ~10⁵ live rows —
 * a deployment with far more would keep these as counters in the read model instead).
 */
export async function taskFigures(db: Kysely<Database>, stuckAfterMs: number): Promise<TaskFigures> {
  const r = await sql<{ by_status: Record<string, number> | null; open: { kind: string; count: number; oldest_s: number }[] | null; stuck: number }>`
    select
      (select jsonb_object_agg(status, n) from (select status, count(*)::int as n from tasks group by status) s) as by_status,
      (select jsonb_agg(jsonb_build_object('kind', kind, 'count', n, 'oldest_s', oldest_s)) from (
         select r->>'kind' as kind, count(*)::int as n, extract(epoch from now() - min((r->>'openedAt')::timestamptz))::float8 as oldest_s
         from tasks t cross join lateral jsonb_array_elements(t.pending_requests) r
         where t.status not in ('completed', 'failed', 'cancelled') and jsonb_array_length(t.pending_requests) > 0
         group by 1) o) as open,
      (select count(*)::int from tasks where ${stuck(stuckAfterMs)}) as stuck`.execute(db);
  const row = r.rows[0];
  return {
    byStatus: row?.by_status ?? {},
    openRequests: Object.fromEntries((row?.open ?? []).map((o) => [o.kind, { count: o.count, oldestS: Math.max(0, o.oldest_s) }])),
    stuck: row?.stuck ?? 0,
  };
}
