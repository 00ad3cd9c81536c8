import { describe, expect, it } from 'vitest';
import { keyedCoalesced, keyedSerial } from './keyed.ts';

describe('keyedSerial', () => {
  it('runs one at a time per key, keys in parallel, and goes on after a failure', async () => {
    const serial = keyedSerial();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const a1 = serial('a', async () => {
      order.push('a1 start');
      await gate;
      order.push('a1 end');
      throw new Error('a1 failed');
    });
    const a2 = serial('a', async () => {
      order.push('a2');
      return 2;
    });
    const b1 = serial('b', async () => {
      order.push('b1');
      return 1;
    });
    expect(await b1).toBe(1);
    expect(order).toEqual(['a1 start', 'b1']); // b did not wait for a
    release();
    await expect(a1).rejects.toThrow('a1 failed');
    expect(await a2).toBe(2);
    expect(order).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
  });
});

describe('keyedCoalesced', () => {
  it('one run at a time per key and at most one waiting: a call while one waits joins it and returns at once; a failure lets the next go on', async () => {
    const coalesced = keyedCoalesced();
    const runs: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = coalesced('t', async () => (runs.push('first'), await gate, 1));
    const second = coalesced('t', async () => (runs.push('second'), 2));
    // Ten more wake-ups while the first hangs: joined, answered at once, nothing queued behind.
    const joined = await Promise.all(Array.from({ length: 10 }, (_, i) => coalesced('t', async () => (runs.push(`extra ${i}`), 0))));
    expect(joined).toEqual(Array.from({ length: 10 }, () => ({ ran: false })));
    expect(await coalesced('other', async () => 'o')).toEqual({ ran: true, result: 'o' }); // another key does not wait
    release();
    expect(await first).toEqual({ ran: true, result: 1 });
    expect(await second).toEqual({ ran: true, result: 2 });
    expect(runs).toEqual(['first', 'second']);
    // Once the waiting run has started, a new call waits again (it must see what came after).
    let releaseB!: () => void;
    const gateB = new Promise<void>((r) => (releaseB = r));
    const b1 = coalesced('t', async () => (await gateB, Promise.reject(new Error('b1 failed'))));
    const b2 = coalesced('t', async () => 'b2');
    releaseB();
    await expect(b1).rejects.toThrow('b1 failed');
    expect(await b2).toEqual({ ran: true, result: 'b2' });
  });
});
