import { describe, expect, test } from 'vitest';
import { Coalescer } from './coalesce.ts';

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('Coalescer', () => {
  test('sends queued from separate callbacks of one turn run together, in order, in the next check phase', async () => {
    const c = new Coalescer();
    const sent: number[] = [];
    await Promise.all([1, 2, 3].map((n) => new Promise<void>((r) => setImmediate(() => (c.soon(() => sent.push(n)), r())))));
    expect(sent).toEqual([]); // nothing sent from the callbacks themselves
    await nextTurn();
    expect(sent).toEqual([1, 2, 3]);
  });

  test('flush sends what is queued at once (before a connection is drained); a send that throws does not stop the others', () => {
    const c = new Coalescer();
    const sent: string[] = [];
    c.soon(() => sent.push('a'));
    c.soon(() => {
      throw new Error('connection closed');
    });
    c.soon(() => sent.push('c'));
    c.flush();
    expect(sent).toEqual(['a', 'c']);
    c.flush(); // nothing left: no second send
    expect(sent).toEqual(['a', 'c']);
  });
});
