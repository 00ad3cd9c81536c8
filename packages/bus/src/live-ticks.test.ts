import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { encodeLiveTicks, LIVE_TICK_IDS_PER_MESSAGE, LiveTicks, parseLiveTicks } from './live-ticks.ts';

describe('LiveTicks', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  /** A LiveTicks whose end-of-turn sends are held until `endTurn()`, and the messages it sent. */
  function setup(gapMs = 20) {
    let turn: (() => void)[] = [];
    const ticks = new LiveTicks(gapMs, (send) => void turn.push(send));
    const sent: { subject: string; ids: string[] }[] = [];
    const tick = (subject: string, id: string): void => ticks.tick(subject, id, (ids) => void sent.push({ subject, ids }));
    const endTurn = (): void => {
      const sends = turn;
      turn = [];
      for (const s of sends) s();
    };
    return { ticks, sent, tick, endTurn };
  }

  test("a quiet process's first ticks go at the end of the turn, in one message; those within the gap after it go together when it ends; after a quiet gap, with their turn again", () => {
    const { ticks, sent, tick, endTurn } = setup();
    tick('live', 'a');
    tick('live', 'b');
    tick('live', 'a');
    expect(sent).toEqual([]);
    endTurn();
    expect(sent).toEqual([{ subject: 'live', ids: ['a', 'b'] }]);
    vi.advanceTimersByTime(5);
    for (const id of ['a', 'c', 'a', 'd']) tick('live', id);
    endTurn(); // nothing more at the end of this turn: the gap is not over
    expect(sent).toHaveLength(1);
    expect(ticks.due).toBe(3);
    vi.advanceTimersByTime(15); // the gap ends: they go at the end of that turn, with its other sends
    expect(sent).toHaveLength(1);
    endTurn();
    expect(sent).toEqual([{ subject: 'live', ids: ['a', 'b'] }, { subject: 'live', ids: ['a', 'c', 'd'] }]);
    expect(ticks.due).toBe(0);
    // That send opened another gap: a tick within it waits for its end.
    vi.advanceTimersByTime(10);
    tick('live', 'e');
    endTurn();
    expect(sent).toHaveLength(2);
    vi.advanceTimersByTime(10);
    endTurn();
    expect(sent.at(-1)).toEqual({ subject: 'live', ids: ['e'] });
    // A gap with nothing to send closes it: the next tick goes with its turn.
    vi.advanceTimersByTime(20);
    expect(vi.getTimerCount()).toBe(0);
    tick('live', 'f');
    endTurn();
    expect(sent.at(-1)).toEqual({ subject: 'live', ids: ['f'] });
  });

  test('the gap is counted from the send, not from the tick (a long turn does not shorten it)', () => {
    const { sent, tick, endTurn } = setup();
    tick('live', 'a');
    vi.advanceTimersByTime(15); // the rest of a long turn
    endTurn();
    expect(sent).toHaveLength(1);
    tick('live', 'b');
    vi.advanceTimersByTime(10);
    endTurn();
    expect(sent).toHaveLength(1); // 10 ms after the send: still within its gap
    vi.advanceTimersByTime(10);
    endTurn();
    expect(sent.at(-1)).toEqual({ subject: 'live', ids: ['b'] });
  });

  test('each subject (namespace) is its own message, sent with the newest send asked for', () => {
    const { ticks } = setup();
    const sent: string[] = [];
    ticks.tick('x.live', 'a', (ids) => void sent.push(`old x ${ids.join()}`));
    ticks.tick('y.live', 'b', (ids) => void sent.push(`y ${ids.join()}`));
    ticks.tick('x.live', 'c', (ids) => void sent.push(`new x ${ids.join()}`));
    ticks.flush();
    expect(sent).toEqual(['new x a,c', 'y b']);
  });

  test(`more than ${LIVE_TICK_IDS_PER_MESSAGE} tasks are split over messages, none lost`, () => {
    const { sent, tick, endTurn } = setup();
    const ids = Array.from({ length: LIVE_TICK_IDS_PER_MESSAGE * 2 + 1 }, (_, i) => `t${i}`);
    for (const id of ids) tick('live', id);
    endTurn();
    expect(sent.map((m) => m.ids.length)).toEqual([LIVE_TICK_IDS_PER_MESSAGE, LIVE_TICK_IDS_PER_MESSAGE, 1]);
    expect(sent.flatMap((m) => m.ids)).toEqual(ids);
  });

  test('flush sends every tick due now and leaves no timer; a send that throws does not stop the others', () => {
    const { ticks, endTurn } = setup(60_000);
    const sent: string[] = [];
    ticks.tick('x.live', 'a', (ids) => void sent.push(...ids));
    endTurn(); // sent, and a gap of a minute opened
    ticks.tick('x.live', 'b', () => {
      throw new Error('connection closed');
    });
    ticks.tick('y.live', 'c', (ids) => void sent.push(...ids));
    expect(ticks.due).toBe(2);
    ticks.flush();
    expect(sent).toEqual(['a', 'c']);
    expect(ticks.due).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('parseLiveTicks', () => {
  const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

  test('reads the task ids a tick names', () => {
    const ids = [randomUUID(), randomUUID()];
    expect(parseLiveTicks(bytes(encodeLiveTicks(ids)))).toEqual({ ok: true, taskIds: ids });
  });

  test('refuses what is not a list of task ids, saying what is wrong', () => {
    expect(parseLiveTicks(bytes(''))).toMatchObject({ ok: false, error: expect.stringContaining('not JSON') });
    expect(parseLiveTicks(bytes('[]'))).toMatchObject({ ok: false, error: expect.stringContaining('>=1') });
    const bad = parseLiveTicks(bytes(JSON.stringify([randomUUID(), 'task-7'])));
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/UUID[\s\S]*at \[1\]/);
  });
});
