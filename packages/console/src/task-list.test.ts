import type { TaskListItem } from '@baton/api';
import { describe, expect, it } from 'vitest';
import { createdWhen, mergeTask, reaches, settle } from '../ui/task-list.ts';

const item = (id: string, createdAt: string, o: Partial<TaskListItem> = {}): TaskListItem => ({ id, status: 'running', prompt: id, team: 'research', createdAt, updatedAt: createdAt, version: 2, pendingRequests: [], forkedFrom: null, ...o });
const any = { status: '', team: '', search: '' };

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
    const running = { status: 'running', team: '', search: '' };
    expect(mergeTask(list, item('b', '2026-11-26T02:00:00Z', { status: 'completed', version: 3 }), running, true).map((t) => t.id)).toEqual(['c', 'a']);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { team: 'engineering' }), { status: '', team: 'research', search: '' }, true)).toEqual(list);
    expect(mergeTask(list, item('e', '2026-11-26T05:00:00Z', { status: 'pending' }), running, true)).toEqual(list);
  });
});

describe('mergeTask with a search', () => {
  it('a change to a task whose prompt contains the search (any case) goes in; any other never does', () => {
    const list = [item('b', '2026-11-26T02:00:00Z', { prompt: 'Compare vector databases' })];
    const search = { status: '', team: '', search: ' VECTOR ' };
    expect(mergeTask(list, item('c', '2026-11-26T03:00:00Z', { prompt: 'More on Vector search' }), search, true).map((t) => t.id)).toEqual(['c', 'b']);
    expect(mergeTask(list, item('d', '2026-11-26T04:00:00Z', { prompt: 'Something else' }), search, true)).toEqual(list);
  });
});

describe('settle: the pages just loaded, with the changes the stream brought while they loaded', () => {
  const loaded = [item('b', '2026-11-26T02:00:00Z', { version: 4 }), item('a', '2026-11-26T01:00:00Z', { version: 4 })];
  it('a newer version of a task read goes in; an older one changes nothing; a new task goes on top', () => {
    const arrived = [item('b', '2026-11-26T02:00:00Z', { version: 7, status: 'completed' }), item('a', '2026-11-26T01:00:00Z', { version: 3 }), item('n', '2026-11-26T05:00:00Z')];
    expect(settle(loaded, arrived, any, false).map((t) => [t.id, t.version])).toEqual([['n', 2], ['b', 7], ['a', 4]]);
  });
  it('a task that left the status filtered by while the pages loaded is taken out; one older than all read waits for its page unless the list is complete', () => {
    const running = { status: 'running', team: '', search: '' };
    expect(settle(loaded, [item('b', '2026-11-26T02:00:00Z', { version: 5, status: 'completed' })], running, false).map((t) => t.id)).toEqual(['a']);
    const old = item('old', '2026-11-25T00:00:00Z', { version: 9 });
    expect(settle(loaded, [old], any, false).map((t) => t.id)).toEqual(['b', 'a']);
    expect(settle(loaded, [old], any, true).map((t) => t.id)).toEqual(['b', 'a', 'old']);
  });
});

describe('reaches: where a reload may stop (at the oldest task shown)', () => {
  it('by creation time, then id, as the list is ordered', () => {
    const mark = item('m', '2026-11-26T02:00:00Z');
    expect(reaches(item('x', '2026-11-26T01:00:00Z'), mark)).toBe(true);
    expect(reaches(item('m', '2026-11-26T02:00:00Z'), mark)).toBe(true);
    expect(reaches(item('a', '2026-11-26T02:00:00Z'), mark)).toBe(true);
    expect(reaches(item('z', '2026-11-26T02:00:00Z'), mark)).toBe(false);
    expect(reaches(item('x', '2026-11-26T03:00:00Z'), mark)).toBe(false);
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
