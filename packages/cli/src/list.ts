import { matchesSearch, type BatonClient, type TaskSummary } from '@baton/client';
import { describeListItem, describeReconnect, listing } from './views.ts';

/** `baton list`'s options. */
export interface ListOptions {
  status?: string;
  team?: string;
  /** Only tasks whose prompt contains this text (ignoring case). */
  search?: string;
  stuck?: boolean;
  /** Only the forks of this task. */
  forksOf?: string;
  limit: number;
  follow?: boolean;
  signal?: AbortSignal;
}

/** `baton list --follow`, after a reconnect: reads what changed since this long before the newest change it saw (another writer's clock, a slow commit). */
export const LIST_CATCH_UP_MARGIN_MS = 60_000;

/**
 * `baton list`: your tasks, newest first, one line each; with `follow`, then each change as it
 * happens, until `signal` aborts (Ctrl-C). The list is loaded once the stream of changes is
 * ready, so nothing between the two is missed. After a reconnect, what changed meanwhile is read
 * (every task of the team that changed since a little before the newest change seen, page by
 * page) and only what is new is printed. With `status`, a task listed or printed before is
 * printed again when it leaves that status, and after that when its status or its number of open
 * requests changes: the stream sends a task's latest summary when it moves, so changes can come
 * merged, and a task that came back to the status and left it again may show only as another
 * change outside it. With `search`, only tasks whose prompt contains it; with `forksOf`, only that
 * task's forks.
 */
export async function listTasks(api: BatonClient, opts: ListOptions, out: { log: (line: string) => void; error: (line: string) => void }): Promise<void> {
  if (opts.follow && opts.stuck) throw new Error('--follow with --stuck: a task becomes stuck by not changing, so there is no change to follow; run `baton list --stuck` again instead');
  const load = () => api.list({ status: opts.status, team: opts.team, search: opts.search, stuck: opts.stuck, forkedFrom: opts.forksOf, limit: Math.floor(opts.limit) });
  if (!opts.follow) {
    out.log(listing((await load()).items, describeListItem, 'no tasks'));
    return;
  }
  /** Each task's line printed last: its version (a change seen twice is printed once), status and open requests. */
  const printed = new Map<string, { version: number; status: string; open: number }>();
  let newest = '';
  const print = (t: TaskSummary): void => {
    if (t.updatedAt > newest) newest = t.updatedAt;
    const last = printed.get(t.id);
    if ((last?.version ?? -1) >= t.version) return;
    if (opts.search && !matchesSearch(t, opts.search)) return; // the stream brings every change: the search is applied here
    if (opts.forksOf && t.forkedFrom?.taskId !== opts.forksOf.toLowerCase()) return; // and which task it forks
    // With a status: its tasks' changes; the change by which one leaves it; after that, only a
    // change of status or of open requests (not its every step).
    const open = t.pendingRequests.length;
    if (opts.status && t.status !== opts.status && !(last && (last.status === opts.status || last.status !== t.status || last.open !== open))) return;
    printed.set(t.id, { version: t.version, status: t.status, open });
    out.log(describeListItem(t));
  };
  const catchUp = async (): Promise<void> => {
    const since = new Date(Date.parse(newest) - LIST_CATCH_UP_MARGIN_MS).toISOString();
    for await (const t of api.tasks({ team: opts.team, search: opts.search, forkedFrom: opts.forksOf, updatedAfter: since })) print(t);
  };
  const failed = (err: unknown): void => out.error(`could not load the list: ${(err as Error).message}`);
  let first = true;
  await api.watchTasks(print, {
    ...(opts.team ? { team: opts.team } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
    onState: (s, r) => {
      if (s === 'reconnecting') return out.error(describeReconnect(r));
      if (!first) return void catchUp().catch(failed);
      first = false;
      newest = new Date().toISOString(); // until a change is seen: now (the margin covers the clocks' difference)
      void load().then((page) => {
        for (const t of page.items) print(t);
        if (page.items.length === 0) out.log('no tasks');
        out.log('following changes (Ctrl-C stops)…');
      }, failed);
    },
  });
}
