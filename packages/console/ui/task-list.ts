import type { TaskListItem } from '@baton/api';
import { matchesSearch } from '@baton/client';

/** The task list's filters (empty: any). */
export interface ListFilter {
  status: string;
  team: string;
  /** Text the prompt contains (ignoring case), as the API's `search`. */
  search: string;
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
  const matches = (!filter.status || t.status === filter.status) && (!filter.team || t.team === filter.team) && matchesSearch(t, filter.search);
  const rest = shown ? items.filter((x) => x.id !== t.id) : [...items];
  if (!matches) return rest;
  if (shown) return items.map((x) => (x.id === t.id ? t : x));
  // A task the list does not show: put in by creation time (newest first).
  const at = rest.findIndex((x) => reaches(x, t)); // the first one as old as it or older (not itself: it is not shown)
  if (at < 0) return complete ? [...rest, t] : rest;
  return [...rest.slice(0, at), t, ...rest.slice(at)];
}

/**
 * The pages just loaded, as the list to show: the changes the stream brought while the load was
 * on its way (it may have read a task before or after each) are merged into what it read.
 */
export const settle = (loaded: readonly TaskListItem[], arrived: readonly TaskListItem[], filter: ListFilter, complete: boolean): TaskListItem[] =>
  arrived.reduce<TaskListItem[]>((list, t) => mergeTask(list, t, filter, complete), [...loaded]);

/** Is `t` where the list's order reaches `mark` (as old as it, or older)? The list is newest first, by creation time, then id. */
export const reaches = (t: Pick<TaskListItem, 'createdAt' | 'id'>, mark: Pick<TaskListItem, 'createdAt' | 'id'>): boolean =>
  t.createdAt < mark.createdAt || (t.createdAt === mark.createdAt && t.id <= mark.id);

/** When a task was created, as the list shows it: the time if it is today (here), else the date and time. */
export function createdWhen(iso: string, now: Date = new Date()): string {
  const d = new Date(iso);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (d.toDateString() === now.toDateString()) return time;
  const date = d.toLocaleDateString([], { month: 'short', day: 'numeric', ...(d.getFullYear() === now.getFullYear() ? {} : { year: 'numeric' }) });
  return `${date}, ${time}`;
}

/** The window event the task list sends with each change of your tasks it hears live (`detail`: the list item). */
export const TASK_CHANGED = 'baton:task-changed';
