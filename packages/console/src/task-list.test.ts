import type { TaskListItem } from '@baton/api';
import { describe, expect, it } from 'vitest';
import { createdWhen, freshest, mergeTask } from '../ui/task-list.ts';

const item = (id: string, createdAt: string, o: Partial<TaskListItem> = {}): TaskListItem => ({ id, status: 'running', prompt: id, team: 'research', createdAt, updatedAt: createdAt, version: 2, pendingRequests: [], forkedFrom: null, ...o });
const any = { status: '', team: '' };

describe('mergeTask: the task list after a change from the stream', () => {
  const list = [item('c', '2026-11-26T03:00:00Z'), item('b', '2026-11-26T02:00:00Z'), item('a', '2026-11-26T01:00:00Z')];
  it('a new task goes in by creation time, newest first; the list grows (the pages loaded stay whole)', () => {
    expect(mergeTask(list, item('d', '2026-11-26T04:00:00Z'), any, false).map((t) => t.id)).toEqual(['d', 'c', 'b', 'a']);
    expect(mergeTask(list, item('x', '2026-11-26T01:30:00Z'), any, false).map((t) => t.id)).toEqual(['c', 'b', 'x', 'a']);
  });
  it('a task older than all shown goes in at the end when no older page is left, and otherwise waits for its page', () => {
    expect(mergeTask(list, item('old', '2026-11-25T00:00:00Z'), any, true).map((t) => t.id)).toEqual(['c', 'b', 'a', 'old']);
    expect(mergeTask(list, item('old', '2026-11-25T00:00:00Z'), any, false)).toEqual(list);
  });
  it('a shown task is replaced in place by a newer version; an older or the same version changes nothing', () => {
    const done = item('b', '2026-11-26T02:00:00Z', { status: 'completed', version: 9 });
    expect(mergeTask(list, done, any, true)).toEqual([list[0], done, list[2]]);
    expect(mergeTask([list[0]!, done, list[2]!], item('b', '2026-11-26T02:00:00Z', { version: 5 }), any, true)).toEqual([list[0], done, list[2]]);
  });
  it('with filters: a task that leaves the status filtered by is taken out, one of another team never goes in', () => {
    const running = { status: 'running', team: '' };
    expect(mergeTask(list, item('b', '2026-11-26T02:00:00Z', { status: 'completed', version: 3 }), running, true).map((t) => t.id)).toEqual(['c', 'a']);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { team: 'engineering' }), { status: '', team: 'research' }, true)).toEqual(list);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { status: 'pending' }), running, true)).toEqual(list);
  });
});

describe('freshest: the pages just loaded, against what the stream brought meanwhile', () => {
  it('keeps a newer version the stream brought; the load answers for every other task and for the order', () => {
    const loaded = [item('b', '2026-11-26T02:00:00Z', { version: 4 }), item('a', '2026-11-26T01:00:00Z', { version: 4 })];
    const shown = [item('b', '2026-11-26T02:00:00Z', { version: 7, status: 'completed' }), item('a', '2026-11-26T01:00:00Z', { version: 3 }), item('gone', '2026-11-26T00:00:00Z')];
    expect(freshest(loaded, shown)).toEqual([shown[0], loaded[1]]);
  });
});

describe('createdWhen: when a task was created, as the list shows it', () => {
  const now = new Date(2026, 10, 26, 18, 0);
  it("today's tasks show the time; older ones the date too, and the year when it is not this one", () => {
    const today = createdWhen(new Date(2026, 10, 26, 9, 5).toISOString(), now);
    const earlier = createdWhen(new Date(2026, 10, 24, 9, 5).toISOString(), now);
    const lastYear = createdWhen(new Date(2025, 10, 24, 9, 5).toISOString(), now);
    expect(today).toMatch(/^\D*0?9\D05\b/);
    expect(earlier).toContain('24');
    expect(earlier.endsWith(today)).toBe(true);
    expect(earlier).not.toContain('2026');
    expect(lastYear).toContain('2025');
  });
});
