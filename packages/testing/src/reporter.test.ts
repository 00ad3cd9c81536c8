import { describe, expect, it } from 'vitest';
import { describeUnhandled } from './reporter.ts';

describe('the closing lines name an unhandled error', () => {
  it('what it is, the file and test it came from, and the top of its stack', () => {
    const text = describeUnhandled(
      {
        name: 'Error',
        message: 'terminating connection due to administrator command',
        stack: 'Error: terminating connection due to administrator command\n    at Parser.parseErrorMessage (parser.js:1:1)\n    at Socket.emit (node:events:1:1)',
        VITEST_TEST_PATH: '/repo/packages/event-store/src/plans.int.test.ts',
        VITEST_TEST_NAME: 'plans stay task-sized',
      },
      '1 of 1',
      '/repo',
    );
    expect(text).toBe(
      'vitest: unhandled error 1 of 1 (in packages/event-store/src/plans.int.test.ts, at or after "plans stay task-sized"): Error: terminating connection due to administrator command\n' +
        '  at Parser.parseErrorMessage (parser.js:1:1)\n' +
        '  at Socket.emit (node:events:1:1)\n',
    );
  });

  it('a rejection with a value that is no error is still shown', () => {
    expect(describeUnhandled('boom', '2 of 3')).toBe('vitest: unhandled error 2 of 3: Error: boom\n');
  });
});
