import { describe, expect, it } from 'vitest';
import { parseRoute } from '../ui/route.ts';

describe('the console route (the location hash)', () => {
  const id = '0b9f4c1e-2d3a-4b5c-8d7e-6f5a4b3c2d1e';
  it('a task or a chat by id, or the list', () => {
    expect(parseRoute(`#/tasks/${id}`)).toEqual({ page: 'tasks', taskId: id });
    expect(parseRoute(`#/chat/${id}`)).toEqual({ page: 'chat', chatId: id });
    expect(parseRoute('#/tasks')).toEqual({ page: 'tasks', taskId: null });
    expect(parseRoute('')).toEqual({ page: 'tasks', taskId: null });
  });
  it('an id in capitals (pasted from elsewhere) is the same id', () => {
    expect(parseRoute(`#/tasks/${id.toUpperCase()}`)).toEqual({ page: 'tasks', taskId: id });
  });
  it('a segment that is no id is kept, to be named, not silently dropped', () => {
    expect(parseRoute('#/tasks/not-a-task')).toEqual({ page: 'tasks', taskId: null, badId: 'not-a-task' });
    expect(parseRoute(`#/tasks/${id.slice(0, 30)}`)).toEqual({ page: 'tasks', taskId: null, badId: id.slice(0, 30) });
    expect(parseRoute('#/chat/%E0%A4%A')).toEqual({ page: 'chat', chatId: null, badId: '%E0%A4%A' }); // not valid percent-encoding: no throw
    expect(parseRoute('#/tasks/zzz%3Cb%3Ex')).toEqual({ page: 'tasks', taskId: null, badId: 'zzz<b>x' }); // decoded, as a person reads it (React escapes it)
  });
});
