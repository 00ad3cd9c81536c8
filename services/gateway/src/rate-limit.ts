/** A token bucket: `tokens` left as of `at` (milliseconds, any monotonic clock). */
export interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Take one token from a bucket that refills at `ratePerS` up to `burst` (a missing bucket is full).
 * Refused: `retryAfterS`, the whole seconds (at least 1) until a token is there; the bucket is
 * then left as it was refilled.
 */
export function takeToken(bucket: Bucket | undefined, now: number, ratePerS: number, burst: number): { bucket: Bucket; retryAfterS: number | null } {
  const tokens = bucket ? Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * ratePerS) : burst;
  if (tokens >= 1) return { bucket: { tokens: tokens - 1, at: now }, retryAfterS: null };
  return { bucket: { tokens, at: now }, retryAfterS: Math.max(1, Math.ceil((1 - tokens) / ratePerS)) };
}
