import { UNSETTLED_DEAD_LETTERS_TO_GIVE_UP } from '@baton/bus';
import { describe, expect, it } from 'vitest';
import { deadJobFailsAgent } from './worker.ts';

describe('a dead-lettered run job and its agent (deadJobFailsAgent)', () => {
  it('a job that failed fails an agent still dispatched or running; one only never settled leaves it to the watchdog until the agent\'s third such dead letter', () => {
    const last = UNSETTLED_DEAD_LETTERS_TO_GIVE_UP;
    for (const status of ['dispatched', 'running'] as const) {
      expect(deadJobFailsAgent({ unsettled: false }, { status }, 1)).toBe(true);
      for (let n = 1; n < last; n++) expect(deadJobFailsAgent({ unsettled: true }, { status }, n)).toBe(false);
      expect(deadJobFailsAgent({ unsettled: true }, { status }, last)).toBe(true);
    }
    for (const status of ['completed', 'failed', 'cancelled', 'paused'] as const) expect(deadJobFailsAgent({ unsettled: false }, { status }, last)).toBe(false);
    expect(deadJobFailsAgent({ unsettled: false }, undefined, 1)).toBe(false);
  });
});
