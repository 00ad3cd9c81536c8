import { useEffect, useRef, useState } from 'react';
import { announce } from './a11y.tsx';
import { parseRoute, type Route } from './route.ts';

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
 * error) to show where they acted — nothing a person clicks fails silently. `done` is said to
 * assistive technology when it succeeds (what it did: "Approved…"). Its buttons take
 * `busyProps(busy)`, not `disabled`: a press meanwhile is ignored here, and focus stays on them.
 */
export function useAction() {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // A second press while the first is on its way (a double-click) is not a second action.
  const inFlight = useRef(false);
  /** `refused`: told of the error (shown in any case), e.g. to mark and focus the field it names. */
  const run = async <T,>(f: () => Promise<T>, done?: string, refused?: (err: unknown) => void): Promise<T | undefined> => {
    if (inFlight.current) return undefined;
    inFlight.current = true;
    setBusy(true);
    setError(null);
    try {
      const r = await f();
      if (done !== undefined && r !== undefined) announce(done);
      return r;
    } catch (err) {
      setError((err as Error).message);
      refused?.(err);
      return undefined;
    } finally {
      inFlight.current = false;
      setBusy(false);
    }
  };
  return { error, setError, busy, run };
}

/**
 * False for `ms` after `key` (a request's id) first shows, then true: a decision button that
 * appears where the person just clicked (the next request, once one is decided) does not take
 * the rest of a double-click as a decision on something they have not seen.
 */
export function useArmed(key: string | null, ms = 700): boolean {
  const [armed, setArmed] = useState<string | null>(null);
  useEffect(() => {
    if (key === null) return;
    const t = setTimeout(() => setArmed(key), ms);
    return () => clearTimeout(t);
  }, [key, ms]);
  return key !== null && armed === key;
}

/** Open a task that was just made (the list refreshes). */
export function openTask(id: string): void {
  window.dispatchEvent(new Event('baton:tasks-changed'));
  go(`#/tasks/${id}`);
}
