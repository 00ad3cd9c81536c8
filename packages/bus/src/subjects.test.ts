import { describe, expect, it } from 'vitest';
import { busNames } from './subjects.ts';

describe('busNames', () => {
  it('taskOfTransition reads the task of an event or a signal subject, with or without a namespace, and nothing else', () => {
    const id = '0b6f3c5e-6a43-4f0e-9d0e-2a4c0f7b9a11';
    for (const names of [busNames(), busNames('t1')]) {
      expect(names.taskOfTransition(names.eventSubject(id, 'TaskCompleted'))).toBe(id);
      expect(names.taskOfTransition(names.signalSubject(id, 'TaskStarted'))).toBe(id);
      expect(names.taskOfTransition(names.triggerSubject(id, 'TaskSubmitted'))).toBeNull();
      expect(names.taskOfTransition(names.jobSubject('run', id, 'researcher'))).toBeNull();
      expect(names.taskOfTransition(names.liveTicks)).toBeNull();
      expect(names.taskOfTransition(names.eventSubject(id, ''))).toBeNull();
      expect(names.taskOfTransition(`${names.eventSubject(id, 'TaskCompleted')}.more`)).toBeNull();
    }
    expect(busNames('t1').taskOfTransition(busNames('t2').eventSubject(id, 'TaskCompleted'))).toBeNull();
    expect(busNames().taskOfTransition(busNames('t2').eventSubject(id, 'TaskCompleted'))).toBeNull();
  });
});

describe('jobSubject', () => {
  it('keeps valid ids as they are and escapes anything that would make a subject no stream takes', () => {
    const id = '0b6f3c5e-6a43-4f0e-9d0e-2a4c0f7b9a11';
    const names = busNames();
    expect(names.jobSubject('run', id, 'api-report_2')).toBe(`baton.jobs.run.${id}.api-report_2`);
    for (const bad of ['../x', 'a b', 'a.b', '*', '>', '']) {
      const subject = names.jobSubject('run', id, bad);
      expect(subject.split('.')).toHaveLength(5);
      expect(subject.split('.').every((t) => /^[A-Za-z0-9_~-]+$/.test(t))).toBe(true);
    }
    expect(names.jobSubject('run', id, 'a.b')).not.toBe(names.jobSubject('run', id, 'a-b'));
  });
});
