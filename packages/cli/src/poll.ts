/** What `pollUntil` makes of the time running out: the error to throw (the last failure, if any, is its cause). */
export type PollTimeout = (lastError: unknown) => Error | Promise<Error>;

/**
 * The CLI's one "wait until" loop: call `check` until it gives a value (anything but null,
 * undefined or false), sleeping `intervalMs` between calls (a function of the attempt for a
 * backoff). A `check` that throws counts as "not yet" (a server still starting; `onRetry` hears
 * of it when another attempt follows) unless `retryErrors` is false (or says false of that
 * error), when it ends the wait at once; once `timeoutMs` has passed, `onTimeout` names what did not happen, with the last error
 * as cause.
 */
export async function pollUntil<T>(
  check: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  o: { timeoutMs: number; intervalMs: number | ((attempt: number) => number); onTimeout: PollTimeout; onRetry?: (err: unknown, attempt: number) => void; retryErrors?: boolean | ((err: unknown) => boolean) },
): Promise<T> {
  const deadline = Date.now() + o.timeoutMs;
  for (let attempt = 1; ; attempt++) {
    let lastError: unknown;
    try {
      const v = await check();
      if (v !== null && v !== undefined && v !== false) return v;
    } catch (err) {
      if (o.retryErrors === false || (typeof o.retryErrors === 'function' && !o.retryErrors(err))) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      const err = await o.onTimeout(lastError);
      if (lastError !== undefined && err.cause === undefined) err.cause = lastError;
      throw err;
    }
    if (lastError !== undefined) o.onRetry?.(lastError, attempt);
    await new Promise((r) => setTimeout(r, typeof o.intervalMs === 'number' ? o.intervalMs : o.intervalMs(attempt)));
  }
}
