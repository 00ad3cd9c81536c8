import { describe, expect, it } from 'vitest';
import { takeToken, type Bucket } from './rate-limit.ts';

describe('takeToken (a token bucket)', () => {
  it('allows a burst, then refuses with the whole seconds until the next token; refills at the rate, up to the burst', () => {
    let b: Bucket | undefined;
    const take = (now: number, rate = 2, burst = 3) => {
      const r = takeToken(b, now, rate, burst);
      b = r.bucket;
      return r.retryAfterS;
    };
    expect([take(0), take(0), take(0)]).toEqual([null, null, null]);
    expect(take(0)).toBe(1); // half a second at 2/s, rounded up to a whole second
    expect(take(100)).toBe(1);
    expect(take(500)).toBeNull(); // 0.5 s: one token came back
    expect(take(500)).toBe(1);
    expect([take(60_000), take(60_000), take(60_000), take(60_000)]).toEqual([null, null, null, 1]); // an idle minute refills to the burst only
  });

  it('a slow rate answers a longer Retry-After', () => {
    const empty = takeToken(undefined, 0, 0.1, 1).bucket;
    expect(takeToken(empty, 0, 0.1, 1).retryAfterS).toBe(10);
    expect(takeToken(empty, 9_500, 0.1, 1).retryAfterS).toBe(1);
    expect(takeToken(empty, 10_000, 0.1, 1).retryAfterS).toBeNull();
  });
});
