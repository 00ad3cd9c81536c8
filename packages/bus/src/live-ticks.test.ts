import { describe, expect, test } from 'vitest';
import { LiveTicks, tickDelay } from './live-ticks.ts';

describe('tickDelay', () => {
  test('at once for a first tick or after the gap; else the rest of the gap', () => {
    expect(tickDelay(100, undefined, 20)).toBe(0);
    expect(tickDelay(120, 100, 20)).toBe(0);
    expect(tickDelay(105, 100, 20)).toBe(15);
  });
});

describe('LiveTicks', () => {
  test('the first tick goes at once; those within the gap fold into one at its end; keys are independent', async () => {
    let now = 0;
    const ticks = new LiveTicks(20, () => now);
    const sent: string[] = [];
    ticks.tick('a', () => sent.push('a'));
    ticks.tick('b', () => sent.push('b'));
    expect(sent).toEqual(['a', 'b']);
    now = 5;
    for (let i = 0; i < 10; i++) ticks.tick('a', () => sent.push('a-trailing'));
    expect(sent).toEqual(['a', 'b']);
    expect(ticks.due).toBe(1);
    await new Promise<void>((r) => {
      const wait = (): void => void (ticks.due === 0 ? r() : setTimeout(wait, 5));
      wait();
    });
    expect(sent).toEqual(['a', 'b', 'a-trailing']); // one trailing tick for the ten
    now = 100; // long after: at once again
    ticks.tick('a', () => sent.push('a-later'));
    expect(sent.at(-1)).toBe('a-later');
  });

  test('flush sends every trailing tick now and leaves no timer', () => {
    let now = 0;
    const ticks = new LiveTicks(60_000, () => now);
    const sent: string[] = [];
    ticks.tick('a', () => sent.push('a'));
    now = 1;
    ticks.tick('a', () => sent.push('a-trailing'));
    expect(ticks.due).toBe(1);
    ticks.flush();
    expect(sent).toEqual(['a', 'a-trailing']);
    expect(ticks.due).toBe(0);
  });
});
