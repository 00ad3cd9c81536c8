import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_HORIZON_MS, nextRetryDelay, retrySchedule } from './schedule.ts';

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const HOUR = 3_600_000;

describe('retry schedule', () => {
  it('the default: 12 attempts over about three days, growing from 5 s and levelling off', () => {
    const s = retrySchedule(DEFAULT_RETRY_HORIZON_MS, 12);
    expect(s).toHaveLength(11);
    expect(s.slice(0, 4)).toEqual([5000, 20_000, 80_000, 320_000]);
    expect(Math.abs(sum(s) - DEFAULT_RETRY_HORIZON_MS)).toBeLessThan(10);
    for (let i = 1; i < s.length; i++) expect(s[i]).toBeGreaterThanOrEqual(s[i - 1]!);
    expect(Math.max(...s)).toBeGreaterThan(15 * HOUR);
    expect(Math.max(...s)).toBeLessThan(17 * HOUR); // no single wait of days
  });
  it('few attempts: the last wait takes the rest of the horizon', () => {
    expect(retrySchedule(DEFAULT_RETRY_HORIZON_MS, 3)).toEqual([5000, DEFAULT_RETRY_HORIZON_MS - 5000]);
  });
  it('a short horizon: the waits are capped to fit it; one attempt: no waits', () => {
    const s = retrySchedule(60_000, 6);
    expect(Math.abs(sum(s) - 60_000)).toBeLessThan(10);
    expect(s[0]).toBe(5000);
    expect(retrySchedule(DEFAULT_RETRY_HORIZON_MS, 1)).toEqual([]);
  });
  it('a horizon shorter than the first wait: every wait shrinks to fit', () => {
    const s = retrySchedule(1000, 4);
    expect(Math.abs(sum(s) - 1000)).toBeLessThan(5);
  });
});

describe('the wait before the next attempt', () => {
  const schedule = retrySchedule(DEFAULT_RETRY_HORIZON_MS, 12);
  it("is the schedule's, unless the receiver asks for longer (Retry-After)", () => {
    expect(nextRetryDelay(schedule, 1, null)).toBe(5000);
    expect(nextRetryDelay(schedule, 3, null)).toBe(80_000);
    expect(nextRetryDelay(schedule, 1, 60_000)).toBe(60_000);
  });
  it('a Retry-After shorter than the schedule does not shorten it: 12 attempts still span the horizon, not 12 seconds', () => {
    const waits = Array.from({ length: 11 }, (_, i) => nextRetryDelay(schedule, i + 1, 1000));
    expect(waits).toEqual(schedule);
  });
  it("a far-off Retry-After waits at most the schedule's longest wait (not past the horizon)", () => {
    expect(nextRetryDelay(schedule, 2, 30 * 86_400_000)).toBe(Math.max(...schedule));
    expect(nextRetryDelay(schedule, 50, null)).toBe(schedule.at(-1));
  });
});
