import { describe, expect, it } from 'vitest';
import { viewDiff } from './diff.ts';

describe('viewDiff', () => {
  it('names each changed leaf by path; additions and removals are one change each', () => {
    const before = { status: 'running', agents: [{ id: 'r-1', status: 'running', turns: 1 }], pendingRequests: [], updatedAt: 'a' };
    const after = { status: 'awaiting_input', agents: [{ id: 'r-1', status: 'paused', turns: 1 }], pendingRequests: [{ requestId: 'x' }], updatedAt: 'b' };
    expect(viewDiff(before, after, new Set(['updatedAt']))).toEqual([
      { path: 'status', before: 'running', after: 'awaiting_input' },
      { path: 'agents[0].status', before: 'running', after: 'paused' },
      { path: 'pendingRequests[0]', before: undefined, after: { requestId: 'x' } },
    ]);
    expect(viewDiff({ a: [1, 2] }, { a: [1, 2] })).toEqual([]);
  });
});
