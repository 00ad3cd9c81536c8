import type { TaskListItem } from '@baton/api';
import { describe, expect, it } from 'vitest';
import { mergeTask } from '../ui/task-list.ts';

const item = (id: string, createdAt: string, o: Partial<TaskListItem> = {}): TaskListItem => ({ id, status: 'running', prompt: id, team: 'research', createdAt, updatedAt: createdAt, version: 2, pendingRequests: [], forkedFrom: null, ...o });
const any = { status: '', team: '' };

describe('mergeTask: the task list after a change from the stream', () => {
  const list = [item('c', '2026-11-26T03:00:00Z'), item('b', '2026-11-26T02:00:00Z'), item('a', '2026-11-26T01:00:00Z')];
  it('a new task goes in by creation time, newest first, within the limit', () => {
    expect(mergeTask(list, item('d', '2026-11-26T04:00:00Z'), any, 10).map((t) => t.id)).toEqual(['d', 'c', 'b', 'a']);
    expect(mergeTask(list, item('x', '2026-11-26T01:30:00Z'), any, 10).map((t) => t.id)).toEqual(['c', 'b', 'x', 'a']);
    expect(mergeTask(list, item('d', '2026-11-26T04:00:00Z'), any, 3).map((t) => t.id)).toEqual(['d', 'c', 'b']);
    expect(mergeTask(list, item('old', '2026-11-25T00:00:00Z'), any, 3)).toEqual(list); // older than all it shows: beyond the limit
  });
  it('a shown task is replaced in place by a newer version; an older or the same version changes nothing', () => {
    const done = item('b', '2026-11-26T02:00:00Z', { status: 'completed', version: 9 });
    expect(mergeTask(list, done, any, 10)).toEqual([list[0], done, list[2]]);
    expect(mergeTask([list[0]!, done, list[2]!], item('b', '2026-11-26T02:00:00Z', { version: 5 }), any, 10)).toEqual([list[0], done, list[2]]);
  });
  it('with filters: a task that leaves the status filtered by is taken out, one of another team never goes in', () => {
    const running = { status: 'running', team: '' };
    expect(mergeTask(list, item('b', '2026-11-26T02:00:00Z', { status: 'completed', version: 3 }), running, 10).map((t) => t.id)).toEqual(['c', 'a']);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { team: 'engineering' }), { status: '', team: 'research' }, 10)).toEqual(list);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { status: 'pending' }), running, 10)).toEqual(list);
  });
});
