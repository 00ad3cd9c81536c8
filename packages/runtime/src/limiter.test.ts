import { describe, expect, it } from 'vitest';
import { limiter } from './limiter.ts';

describe('limiter', () => {
  it('runs at most max at once, the rest in the order they came; a failure frees its slot', async () => {
    const limit = limiter(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const gates = Array.from({ length: 5 }, () => Promise.withResolvers<void>());
    const runs = gates.map((g, i) =>
      limit(async () => {
        started.push(i);
        most = Math.max(most, ++running);
        try {
          await g.promise;
          if (i === 1) throw new Error('boom');
          return i;
        } finally {
          running--;
        }
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    gates[1]!.resolve();
    await expect(runs[1]).rejects.toThrow('boom');
    expect(started).toEqual([0, 1, 2]);
    for (const g of gates) g.resolve();
    expect(await Promise.all([runs[0], runs[2], runs[3], runs[4]])).toEqual([0, 2, 3, 4]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it('refuses a max that is not a whole number of at least 1, naming it', () => {
    expect(() => limiter(0)).toThrow(/max must be a whole number ≥ 1, got 0/);
    expect(() => limiter(1.5)).toThrow(/got 1.5/);
  });
});
