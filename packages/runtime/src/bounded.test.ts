import { describe, expect, it } from 'vitest';
import { setBounded } from './bounded.ts';

describe('setBounded', () => {
  it('keeps at most max entries, forgetting the oldest; a key set again counts as newest', () => {
    const m = new Map<string, number>();
    for (const [k, v] of [['a', 1], ['b', 2], ['c', 3]] as const) setBounded(m, k, v, 3);
    setBounded(m, 'a', 10, 3); // a is now the newest
    setBounded(m, 'd', 4, 3); // b, the oldest, goes
    expect([...m]).toEqual([['c', 3], ['a', 10], ['d', 4]]);
    setBounded(m, 'e', 5, 1);
    expect([...m]).toEqual([['e', 5]]);
  });
});
