import { describe, expect, it } from 'vitest';
import { parseTestCounts, testRun } from './test-counts.ts';

describe('parseTestCounts', () => {
  it.each([
    ['vitest', ' \x1b[32m✓\x1b[0m a.test.ts\n\n Test Files  1 failed | 2 passed (3)\n      Tests  2 failed | 5 passed | 1 skipped (8)\n', { passed: 5, failed: 2, skipped: 1, failedFiles: 1 }],
    ['jest', 'Test Suites: 1 failed, 1 total\nTests:       1 failed, 4 passed, 5 total\n', { passed: 4, failed: 1, skipped: 0 }],
    ['tap', 'TAP version 13\n# tests 4\n# suites 0\n# pass 3\n# fail 1\n# cancelled 0\n# skipped 0\n# todo 0\n', { passed: 3, failed: 1, skipped: 0 }],
    ['node-spec', '✔ adds (0.5ms)\n✖ subtracts (0.7ms)\nℹ tests 4\nℹ suites 0\nℹ pass 3\nℹ fail 1\nℹ cancelled 0\nℹ skipped 0\nℹ todo 0\n', { passed: 3, failed: 1, skipped: 0 }],
    ['pytest', '============ 1 failed, 3 passed, 2 skipped in 0.12s ============\n', { passed: 3, failed: 1, skipped: 2 }],
    // -q (a common addopts) prints the summary bare: it had read as no counts, and failed acceptance.
    ['pytest', '.....                                                   [100%]\n5 passed in 0.02s\n', { passed: 5, failed: 0, skipped: 0 }],
    ['pytest', 'F.\nFAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 1 passed in 0.05s\n', { passed: 1, failed: 1, skipped: 0 }],
    ['pytest', '=== 2 failed, 7 passed, 1 xfailed, 1 xpassed, 3 deselected, 2 warnings, 1 error in 12.34s (0:00:12) ===\n', { passed: 8, failed: 3, skipped: 4 }],
    ['pytest', '============================ no tests ran in 0.01s =============================\n', { passed: 0, failed: 0, skipped: 0 }],
    ['pytest', 'no tests ran in 0.01s\n', { passed: 0, failed: 0, skipped: 0 }],
    // A plugin's own items (pytest-subtests, pytest 9's subtests) do not hide the line.
    ['pytest', '==== 3 passed, 2 subtests passed in 0.10s ====\n', { passed: 3, failed: 0, skipped: 0 }],
    ['mocha', '  3 passing (12ms)\n  1 pending\n  2 failing\n', { passed: 3, failed: 2, skipped: 1 }],
    ['cargo', 'test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n', { passed: 3, failed: 1, skipped: 0 }],
    ['go', '=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- FAIL: TestB (0.00s)\nFAIL\n', { passed: 1, failed: 1, skipped: 0 }],
  ])('reads a %s summary', (format, output, counts) => {
    expect(parseTestCounts(output)).toEqual({ ...counts, format });
  });
  it('takes the last summary and says null when there is none', () => {
    expect(parseTestCounts('# pass 1\n# fail 0\n...\n# pass 2\n# fail 3\n')).toMatchObject({ passed: 2, failed: 3 });
    expect(parseTestCounts('make: *** [test] Error 1')).toBeNull();
    expect(parseTestCounts('progress: 12 passed in 3s\n')).toBeNull();
  });
});

describe('testRun: what a run records', () => {
  const vitest = (files: string, tests: string) => parseTestCounts(` Test Files  ${files}\n      Tests  ${tests}\n`);
  it('a suite that exits non-zero never reads "0 failed": a test file that did not load counts as a failure, and says so', () => {
    const r = testRun(vitest('1 failed | 2 passed (3)', '2 passed (2)'), { exitCode: 1, timedOut: false });
    expect(r.tests).toEqual({ passed: 2, failed: 1, skipped: 0 });
    expect(r.summary).toBe('tests failed: 2 passed, 1 failed (vitest) — 1 test file failed without a failed test (did not load?)');
    // A runner that crashed after its tests passed, and a timeout: one failure each.
    expect(testRun(vitest('3 passed (3)', '5 passed (5)'), { exitCode: 134, timedOut: false }).tests.failed).toBe(1);
    expect(testRun(vitest('3 passed (3)', '5 passed (5)'), { exitCode: null, timedOut: true }).summary).toBe('tests timed out: 5 passed, 1 failed (vitest) — counted as 1 failed');
  });
  it('failed tests are counted as the runner counts them; a passing run with no counts records 0 failed, so an older failure does not stand', () => {
    expect(testRun(vitest('1 failed | 2 passed (3)', '2 failed | 5 passed (7)'), { exitCode: 1, timedOut: false }).tests).toEqual({ passed: 5, failed: 2, skipped: 0 });
    expect(testRun(null, { exitCode: 0, timedOut: false })).toEqual({ ok: true, tests: { passed: 0, failed: 0, skipped: 0 }, summary: 'tests passed (no pass/fail counts recognised)' });
    expect(testRun(null, { exitCode: 2, timedOut: false })).toEqual({ ok: false, tests: { passed: 0, failed: 1, skipped: 0 }, summary: 'tests failed (no pass/fail counts recognised: counted as 1 failed)' });
  });
});
