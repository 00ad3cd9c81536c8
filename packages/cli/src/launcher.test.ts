import { describe, expect, it } from 'vitest';
import { DEFAULT_RESTART_POLICY, restartDelay, serviceEnv } from './launcher.ts';

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

describe('serviceEnv (one OPS_PORT for the three workers)', () => {
  it('OPS_PORT=N gives the orchestrator N, the runner N+1, the notifier N+2 (one port for all three: the second would refuse to start); 0 and unset stay', () => {
    const env = { OPS_PORT: '9700', PORT: '8080' };
    expect(['orchestrator', 'sandbox-runner', 'notifier', 'gateway'].map((n) => serviceEnv(n as Parameters<typeof serviceEnv>[0], env).OPS_PORT)).toEqual(['9700', '9701', '9702', '9700']);
    expect(serviceEnv('notifier', { OPS_PORT: '0' }).OPS_PORT).toBe('0');
    expect(serviceEnv('notifier', {}).OPS_PORT).toBeUndefined();
    expect(serviceEnv('notifier', env).PORT).toBe('8080');
  });
});
