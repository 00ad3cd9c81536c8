/**
 * Run at most `max` of the given work at once; the rest wait their turn, first come first served.
 * The gateway's bulk transfers (uploads, forks, artifact downloads) go through one, so that they
 * can never hold every Postgres connection of its pool.
 */
export function limiter(max: number): <T>(fn: () => Promise<T>) => Promise<T> {
  if (!Number.isInteger(max) || max < 1) throw new Error(`limiter: max must be a whole number ≥ 1, got ${max}`);
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (running < max) running++;
    else await new Promise<void>((r) => waiting.push(r)); // handed its slot by the work that ends
    try {
      return await fn();
    } finally {
      release();
    }
  };
}
