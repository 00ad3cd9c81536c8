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

  it('an agent in a model outage (its last model call found the API unable to answer) is left to the watchdog: the agent loop bounds the outage, not the job\'s attempts', () => {
    const modelOutage = { since: '2026-11-27T10:00:00.000Z', failures: 5, error: 'the Messages API could not answer: 529 overloaded' };
    expect(deadJobFailsAgent({ unsettled: false }, { status: 'running', modelOutage }, 1)).toBe(false);
    expect(deadJobFailsAgent({ unsettled: true }, { status: 'running', modelOutage }, UNSETTLED_DEAD_LETTERS_TO_GIVE_UP)).toBe(false);
  });
});
