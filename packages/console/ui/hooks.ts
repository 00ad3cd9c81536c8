import { useEffect, useState } from 'react';

/** The location hash as a route: `#/tasks/<id>`, `#/chat/<id>`, or the list. */
export type Route = { page: 'tasks'; taskId: string | null } | { page: 'chat'; chatId: string | null };

export function parseRoute(hash: string): Route {
  const m = /^#\/(tasks|chat)(?:\/([0-9a-f-]{36}))?/.exec(hash);
  if (m?.[1] === 'chat') return { page: 'chat', chatId: m[2] ?? null };
  return { page: 'tasks', taskId: m?.[2] ?? null };
}

export const go = (hash: string): void => {
  window.location.hash = hash;
};

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const on = (): void => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** Now, ticking every second (deadline countdowns). */
export function useNow(): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}

/** "4m 05s" until a deadline ("passed" after it). */
export function countdown(deadline: string, now: number): string {
  const ms = Date.parse(deadline) - now;
  if (ms <= 0) return 'passed';
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h ${String(m).padStart(2, '0')}m` : `${m}m ${String(s % 60).padStart(2, '0')}s`;
}

/**
 * A person's action that may fail: `run` marks it busy, and keeps the API's refusal (or any
 * error) to show where they acted — nothing a person clicks fails silently.
 */
export function useAction() {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async <T,>(f: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await f();
    } catch (err) {
      setError((err as Error).message);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { error, setError, busy, run };
}

/** Open a task that was just made (the list refreshes). */
export function openTask(id: string): void {
  window.dispatchEvent(new Event('baton:tasks-changed'));
  go(`#/tasks/${id}`);
}
