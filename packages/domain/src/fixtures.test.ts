import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseNewEvent, type RecordedEvent } from './events.ts';
import { fold } from './evolve.ts';

// Immutable fixtures of released (v1) event shapes: they must keep validating and folding.
const raw = JSON.parse(readFileSync(path.join(import.meta.dirname, 'fixtures/v1/research-run.json'), 'utf8')) as { type: string; streamId: string; version: number; data: unknown }[];

describe('v1 event fixtures', () => {
  it('every fixture event validates against the current schemas', () => {
    for (const e of raw) expect(() => parseNewEvent({ id: '00000000-0000-4000-8000-0000000000aa', type: e.type, data: e.data })).not.toThrow();
  });
  it('fold with the current evolve to the expected task', () => {
    const events = raw.map((e, i) => ({ ...e, id: `e${i}`, taskId: '00000000-0000-4000-8000-000000000001', position: BigInt(i + 1), recordedAt: new Date(Date.UTC(2026, 10, 22, 4, 0, i)), metadata: {}, schemaVersion: 1 })) as RecordedEvent[];
    const state = fold(events);
    expect(state).toMatchObject({
      status: 'completed',
      version: 12,
      agents: { 'researcher-1': { id: 'researcher-1', status: 'completed', turns: 1, filesCreated: ['notes.md'] } },
      artifacts: [{ path: 'notes.md', bytes: 1 }],
      result: { summary: 'done' },
    });
    expect(Object.keys(state.agents)).toEqual(['researcher-1']);
    expect(state.pendingRequests).toEqual({});
  });
  it('schemas reject malformed events, naming the field', () => {
    expect(() => parseNewEvent({ id: '00000000-0000-4000-8000-0000000000aa', type: 'TaskFailed', data: { code: '' } })).toThrow(/code|message/);
    expect(() => parseNewEvent({ id: 'x', type: 'Nope', data: {} })).toThrow();
  });
});
