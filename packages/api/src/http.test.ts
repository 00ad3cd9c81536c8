import { describe, expect, it } from 'vitest';
import { retryAfterMs } from './http.ts';

describe('Retry-After', () => {
  it('in seconds or as an HTTP date; past, zero or nonsense: no wish', () => {
    const now = Date.parse('2026-11-27T11:00:00.000Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs(' 5 ', now)).toBe(5000);
    expect(retryAfterMs('Fri, 27 Nov 2026 11:00:04 GMT', now)).toBe(4000);
    expect(retryAfterMs('Fri, 27 Nov 2026 10:59:00 GMT', now)).toBeNull();
    expect([retryAfterMs('0', now), retryAfterMs('soon', now), retryAfterMs(null, now), retryAfterMs(undefined, now), retryAfterMs('-5', now)]).toEqual([null, null, null, null, null]);
  });
});
