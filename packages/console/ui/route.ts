/* The console's routes: pure (no DOM), so Node tests import them. */

/** The location hash as a route: `#/tasks/<id>`, `#/chat/<id>`, or the list; `badId`: a path segment that is no id (shown as such, not ignored). */
export type Route = { page: 'tasks'; taskId: string | null; badId?: string } | { page: 'chat'; chatId: string | null; badId?: string };

/** A percent-encoded path segment as text (as it stands when it is not valid percent-encoding). */
const decoded = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function parseRoute(hash: string): Route {
  const m = /^#\/(tasks|chat)(?:\/([^/?#]*))?/.exec(hash);
  const segment = m?.[2] ? decoded(m[2]).trim().toLowerCase() : '';
  const id = UUID.test(segment) ? segment : null;
  // Named as the person would read it (decoded), not as the URL encodes it.
  const bad = segment && !id ? { badId: decoded(m?.[2] ?? '') } : {};
  if (m?.[1] === 'chat') return { page: 'chat', chatId: id, ...bad };
  return { page: 'tasks', taskId: id, ...bad };
}
