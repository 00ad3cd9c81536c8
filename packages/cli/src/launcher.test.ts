import { describe, expect, it } from 'vitest';
import { DEFAULT_RESTART_POLICY, restartDelay } from './launcher.ts';

describe('restartDelay (the supervisor\'s backoff)', () => {
  const policy = DEFAULT_RESTART_POLICY;

  it('doubles from 0.5 s per restart in a row and is capped at 30 s', () => {
    const delays: number[] = [];
    let streak = 0;
    for (let i = 0; i < 10; i++) {
      const next = restartDelay(policy, streak, 1000); // each run died after a second
      delays.push(next.delayMs);
      streak = next.streak;
    }
    expect(delays).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    expect(streak).toBe(10);
  });

  it('a process that stayed up for resetAfterMs starts a new streak', () => {
    expect(restartDelay(policy, 6, policy.resetAfterMs - 1)).toEqual({ delayMs: 30_000, streak: 7 });
    expect(restartDelay(policy, 6, policy.resetAfterMs)).toEqual({ delayMs: 500, streak: 1 });
  });

  it('takes any policy; a huge streak does not overflow past the cap', () => {
    const p = { initialMs: 100, maxMs: 1000, resetAfterMs: 5000 };
    expect([0, 1, 2, 3, 4].map((s) => restartDelay(p, s, 0).delayMs)).toEqual([100, 200, 400, 800, 1000]);
    expect(restartDelay(p, 10_000, 0).delayMs).toBe(1000);
  });
});
