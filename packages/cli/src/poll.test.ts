import { describe, expect, it } from 'vitest';
import { pollUntil } from './poll.ts';

describe('pollUntil', () => {
  it('returns the first value that is not null, undefined or false; errors are "not yet"', async () => {
    const seen: unknown[] = [];
    let n = 0;
    const v = await pollUntil(
      () => {
        n++;
        if (n === 1) throw new Error('starting');
        return n === 2 ? null : n === 3 ? false : n === 4 ? undefined : { n };
      },
      { timeoutMs: 10_000, intervalMs: 1, onTimeout: () => new Error('never'), onRetry: (err, attempt) => seen.push([(err as Error).message, attempt]) },
    );
    expect(v).toEqual({ n: 5 });
    expect(seen).toEqual([['starting', 1]]);
  });

  it('with retryErrors false, an error ends the wait at once; onRetry is not told of a last attempt', async () => {
    const boom = new Error('connection lost');
    let calls = 0;
    await expect(pollUntil(() => (calls++, Promise.reject(boom)), { timeoutMs: 10_000, intervalMs: 1, retryErrors: false, onTimeout: () => new Error('x') })).rejects.toBe(boom);
    expect(calls).toBe(1);
    const retried: number[] = [];
    // Time is up after the first attempt (a deadline already past): it is not reported as "retrying".
    await expect(pollUntil(() => Promise.reject(boom), { timeoutMs: -1, intervalMs: 1, onRetry: (_e, a) => retried.push(a), onTimeout: () => new Error('gave up') })).rejects.toThrow('gave up');
    expect(retried).toEqual([]);
  });

  it('a value of 0 or an empty string is a value', async () => {
    expect(await pollUntil(() => 0, { timeoutMs: 10, intervalMs: 1, onTimeout: () => new Error('x') })).toBe(0);
    expect(await pollUntil(() => '', { timeoutMs: 10, intervalMs: 1, onTimeout: () => new Error('x') })).toBe('');
  });

  it('once the time is up, throws the error onTimeout names, with the last failure as its cause; the interval may back off', async () => {
    const failure = new Error('connection refused');
    const err = await pollUntil(
      () => {
        throw failure;
      },
      { timeoutMs: 0, intervalMs: 1, onTimeout: (last) => new Error(`not up: ${(last as Error).message}`) },
    ).catch((e: unknown) => e as Error);
    expect(err.message).toBe('not up: connection refused');
    expect(err.cause).toBe(failure);
    const gaps: number[] = [];
    await expect(pollUntil(() => null, { timeoutMs: 20, intervalMs: (a) => (gaps.push(a), 1), onTimeout: () => new Error('still null') })).rejects.toThrow('still null');
    expect(gaps.slice(0, 3)).toEqual([1, 2, 3]);
  });
});
