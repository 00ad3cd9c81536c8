/** The Standard Webhooks guidance: keep retrying a failing endpoint for about three days. */
export const DEFAULT_RETRY_HORIZON_MS = 3 * 86_400_000;

/**
 * The waits between a message's attempts (pure): `attempts - 1` delays that start at `firstMs`,
 * grow by `factor` each time, and level off at the one cap that makes them add up to `horizonMs` —
 * so the last attempt comes about `horizonMs` after the first. Too few attempts to reach the
 * horizon growing by `factor`: the last wait takes what is left. A horizon shorter than the first
 * waits: they are scaled down to fit it.
 */
export function retrySchedule(horizonMs: number, attempts: number, firstMs = 5000, factor = 4): number[] {
  const n = attempts - 1;
  if (n <= 0) return [];
  const grown = Array.from({ length: n }, (_, i) => firstMs * factor ** i);
  const total = (cap: number) => grown.reduce((sum, d) => sum + Math.min(d, cap), 0);
  const uncapped = total(Infinity);
  if (uncapped <= horizonMs) {
    const out = grown.map(Math.round);
    out[n - 1] = Math.round(horizonMs - grown.slice(0, -1).reduce((s, d) => s + d, 0));
    return out;
  }
  // total(cap) grows with cap: find the cap that hits the horizon by bisection.
  let lo = 0;
  let hi = Math.max(...grown);
  for (let i = 0; i < 100 && hi - lo > 0.5; i++) {
    const mid = (lo + hi) / 2;
    if (total(mid) < horizonMs) lo = mid;
    else hi = mid;
  }
  return grown.map((d) => Math.max(1, Math.round(Math.min(d, hi))));
}

/**
 * The wait before a message's next attempt (pure): the schedule's for this attempt, or longer when
 * a receiver asked for it (`Retry-After`) — never shorter (`Retry-After: 1` would spend every
 * attempt in seconds and give the message up during a short maintenance window), and never past
 * the schedule's longest wait (a far-off one would push the retries past the horizon).
 */
export function nextRetryDelay(schedule: readonly number[], attempt: number, retryAfterMs: number | null): number {
  const scheduled = schedule[Math.min(Math.max(attempt, 1) - 1, schedule.length - 1)] ?? 1000;
  if (retryAfterMs === null) return scheduled;
  return Math.min(Math.max(retryAfterMs, scheduled), Math.max(scheduled, ...schedule));
}
