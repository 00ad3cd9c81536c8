/** One change between two views: where (a JSON path), what it was, what it became (undefined: absent). */
export interface ViewChange {
  path: string;
  before: unknown;
  after: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What changed between two JSON values (e.g. a task's view before and after an event): the
 * leaves that differ, by path (`agents[0].status`, `pendingRequests[1]`). Objects are compared
 * key by key, arrays index by index; a value that appears or disappears is one change. Pure.
 */
export function viewDiff(before: unknown, after: unknown, ignore: ReadonlySet<string> = new Set(), path = ''): ViewChange[] {
  if (Object.is(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) => (ignore.has(k) ? [] : viewDiff(before[k], after[k], ignore, path ? `${path}.${k}` : k)));
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const n = Math.max(before.length, after.length);
    return Array.from({ length: n }, (_, i) => viewDiff(before[i], after[i], ignore, `${path}[${i}]`)).flat();
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [{ path, before, after }];
}
