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
