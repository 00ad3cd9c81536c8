import { describe, expect, it } from 'vitest';
import { keyedSerial } from './keyed.ts';

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
