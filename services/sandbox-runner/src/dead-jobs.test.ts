import { describe, expect, it } from 'vitest';
import { deadJobFailsAgent } from './worker.ts';

describe('a dead-lettered run job and its agent (deadJobFailsAgent)', () => {
  it('a job that failed fails an agent still dispatched or running; one whose runners all died leaves it to the watchdog', () => {
    for (const status of ['dispatched', 'running'] as const) {
      expect(deadJobFailsAgent({ unsettled: false }, { status })).toBe(true);
      expect(deadJobFailsAgent({ unsettled: true }, { status })).toBe(false);
    }
    for (const status of ['completed', 'failed', 'cancelled', 'paused'] as const) expect(deadJobFailsAgent({ unsettled: false }, { status })).toBe(false);
    expect(deadJobFailsAgent({ unsettled: false }, undefined)).toBe(false);
  });
});
