import type { TaskListItem } from '@baton/api';

/** The task list's filters (empty: any). */
export interface ListFilter {
  status: string;
  team: string;
}

/**
 * The list after one changed task came on the stream of changes (a pure function: the list is
 * newest first, at most `limit` long). A task that matches the filters is put in, or replaced
 * when this version is newer than the one shown; a task that no longer matches (it left the
 * status filtered by) is taken out. An older version than the one shown changes nothing.
 */
export function mergeTask(items: readonly TaskListItem[], t: TaskListItem, filter: ListFilter, limit: number): TaskListItem[] {
  const i = items.findIndex((x) => x.id === t.id);
  const shown = i >= 0 ? items[i] : undefined;
  if (shown && shown.version >= t.version) return items as TaskListItem[];
  const matches = (!filter.status || t.status === filter.status) && (!filter.team || t.team === filter.team);
  const rest = shown ? items.filter((x) => x.id !== t.id) : [...items];
  if (!matches) return rest;
  if (shown) return items.map((x) => (x.id === t.id ? t : x));
  // A task the list does not show: put in by creation time (newest first), if it falls within the limit.
  const at = rest.findIndex((x) => x.createdAt < t.createdAt || (x.createdAt === t.createdAt && x.id < t.id));
  const next = at < 0 ? [...rest, t] : [...rest.slice(0, at), t, ...rest.slice(at)];
  return next.slice(0, limit);
}
