/**
 * Run work one at a time per key (others run in parallel): a task's lead steps in the
 * orchestrator, one agent's jobs in a runner. Two deliveries of work for the same key in one
 * process then never interleave; across processes, fencing in Postgres still decides.
 * Keys are forgotten as soon as their queue drains (nothing is kept per idle key).
 */
export function keyedSerial(): <T>(key: string, fn: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const prev = tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => {});
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return next;
  };
}

/** What a call to a `keyedCoalesced` runner came to: the run's result, or joined to a run still to start. */
export type Coalesced<T> = { ran: true; result: T } | { ran: false };

/**
 * Like keyedSerial for work that reads the latest state when it starts (advance a task's lead):
 * per key one run at a time and at most one waiting. A call while one runs and another waits
 * joins the waiting one and returns at once (`ran: false`) — that run starts after the call was
 * made, so it sees whatever the call would have. A process whose lead hangs on one task then
 * holds one waiting call for it, not one per wake-up (each held a consumer slot until all were
 * full and every other task stalled).
 */
export function keyedCoalesced(): <T>(key: string, fn: () => Promise<T>) => Promise<Coalesced<T>> {
  const keys = new Map<string, { running: Promise<unknown>; waiting: boolean }>();
  return async <T>(key: string, fn: () => Promise<T>): Promise<Coalesced<T>> => {
    const k = keys.get(key);
    if (k?.waiting) return { ran: false };
    const start = async (): Promise<T> => {
      const entry = keys.get(key);
      if (entry) entry.waiting = false;
      return fn();
    };
    const run = k ? k.running.then(start, start) : start();
    const entry = { running: run.catch(() => {}), waiting: k !== undefined };
    keys.set(key, entry);
    void entry.running.then(() => {
      if (keys.get(key) === entry) keys.delete(key);
    });
    return { ran: true, result: await run };
  };
}
