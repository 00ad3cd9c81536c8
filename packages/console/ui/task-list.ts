import type { TaskListItem } from '@baton/api';

/** The task list's filters (empty: any). */
export interface ListFilter {
  status: string;
  team: string;
}

/**
 * The list after one changed task came on the stream of changes (a pure function: the list is
 * newest first). A task that matches the filters is put in, or replaced when this version is
 * newer than the one shown; a task that no longer matches (it left the status filtered by) is
 * taken out. An older version than the one shown changes nothing. A task older than every one
 * shown goes in only when the list is `complete` (no older page left to load): otherwise it
 * belongs to a page not loaded yet, and comes with that page.
 */
export function mergeTask(items: readonly TaskListItem[], t: TaskListItem, filter: ListFilter, complete: boolean): TaskListItem[] {
  const i = items.findIndex((x) => x.id === t.id);
  const shown = i >= 0 ? items[i] : undefined;
  if (shown && shown.version >= t.version) return items as TaskListItem[];
  const matches = (!filter.status || t.status === filter.status) && (!filter.team || t.team === filter.team);
  const rest = shown ? items.filter((x) => x.id !== t.id) : [...items];
  if (!matches) return rest;
  if (shown) return items.map((x) => (x.id === t.id ? t : x));
  // A task the list does not show: put in by creation time (newest first).
  const at = rest.findIndex((x) => x.createdAt < t.createdAt || (x.createdAt === t.createdAt && x.id < t.id));
  if (at < 0) return complete ? [...rest, t] : rest;
  return [...rest.slice(0, at), t, ...rest.slice(at)];
}

/**
 * The pages just loaded, as the list to show: where the stream brought a newer version of a
 * task while the load was on its way, the newer one is kept.
 */
export const freshest = (loaded: readonly TaskListItem[], shown: readonly TaskListItem[]): TaskListItem[] =>
  loaded.map((t) => shown.find((x) => x.id === t.id && x.version > t.version) ?? t);

/** When a task was created, as the list shows it: the time if it is today (here), else the date and time. */
export function createdWhen(iso: string, now: Date = new Date()): string {
  const d = new Date(iso);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (d.toDateString() === now.toDateString()) return time;
  const date = d.toLocaleDateString([], { month: 'short', day: 'numeric', ...(d.getFullYear() === now.getFullYear() ? {} : { year: 'numeric' }) });
  return `${date}, ${time}`;
}
