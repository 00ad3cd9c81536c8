/** Pass/fail counts read from a test runner's output, when its summary is recognisable. */
export interface TestCounts {
  passed: number;
  failed: number;
  skipped: number;
  /** Which summary format matched. */
  format: string;
  /** Test files that failed as a whole (vitest's "Test Files 1 failed": one that did not load counts no failed test). */
  failedFiles?: number;
}

const num = (m: RegExpExecArray | null, i = 1): number => (m ? Number(m[i]) : 0);

/**
 * Recognises the summaries of vitest/jest, node --test (TAP), pytest, mocha, go test and cargo
 * test. The last summary in the output wins (watch-like output repeats them). Null when none
 * is recognisable — the exit code still says pass or fail.
 */
export function parseTestCounts(output: string): TestCounts | null {
  const text = output.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), ''); // colours off
  const last = (re: RegExp): RegExpExecArray | null => {
    let m: RegExpExecArray | null = null;
    for (const x of text.matchAll(new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`))) m = x as RegExpExecArray;
    return m;
  };
  // vitest: " Tests  2 failed | 5 passed | 1 skipped (8)"
  const vitest = last(/^\s*Tests\s+(.*\(\d+\))\s*$/m);
  if (vitest) {
    const s = vitest[1] ?? '';
    const files = last(/^\s*Test Files\s+(.*\(\d+\))\s*$/m)?.[1] ?? '';
    return { passed: num(/(\d+) passed/.exec(s)), failed: num(/(\d+) failed/.exec(s)), skipped: num(/(\d+) skipped/.exec(s)) + num(/(\d+) todo/.exec(s)), format: 'vitest', failedFiles: num(/(\d+) failed/.exec(files)) };
  }
  // jest: "Tests:       1 failed, 4 passed, 5 total"
  const jest = last(/^Tests:\s+(.*\d+ total)\s*$/m);
  if (jest) {
    const s = jest[1] ?? '';
    return { passed: num(/(\d+) passed/.exec(s)), failed: num(/(\d+) failed/.exec(s)), skipped: num(/(\d+) skipped/.exec(s)) + num(/(\d+) todo/.exec(s)), format: 'jest' };
  }
  // node --test / TAP: "# pass 3", "# fail 1"
  const tapPass = last(/^# pass (\d+)$/m);
  if (tapPass) return { passed: num(tapPass), failed: num(last(/^# fail (\d+)$/m)), skipped: num(last(/^# skipped (\d+)$/m)) + num(last(/^# todo (\d+)$/m)), format: 'tap' };
  // node --test's spec reporter (the default since Node 23): "ℹ pass 3", "ℹ fail 1"
  const specPass = last(/^ℹ pass (\d+)$/m);
  if (specPass) return { passed: num(specPass), failed: num(last(/^ℹ fail (\d+)$/m)), skipped: num(last(/^ℹ skipped (\d+)$/m)) + num(last(/^ℹ todo (\d+)$/m)), format: 'node-spec' };
  // pytest: "==== 1 failed, 3 passed, 2 skipped in 0.12s ====", and with -q the same bare
  // ("5 passed in 0.02s", a common addopts: it read as no counts and failed acceptance); "no
  // tests ran in 0.01s". xfailed and deselected tests are skipped ones, xpassed passed ones.
  // Any "<n> <words>" items are taken (plugins add their own: "2 subtests passed"), the known ones counted.
  const pytest = last(/^(?:=+ )?((?:\d+ [a-z][a-z ]*?(?:, |(?= in )))+) in [\d.]+s(?: \([\d:.]+\))?(?: =+)?$/m) ?? last(/^(?:=+ )?()no tests ran in [\d.]+s(?: =+)?$/m);
  if (pytest) {
    const s = pytest[1] ?? '';
    return {
      passed: num(/(?:^|, )(\d+) passed/.exec(s)) + num(/(?:^|, )(\d+) xpassed/.exec(s)),
      failed: num(/(?:^|, )(\d+) failed/.exec(s)) + num(/(?:^|, )(\d+) errors?(?:,|$)/.exec(s)),
      skipped: num(/(?:^|, )(\d+) skipped/.exec(s)) + num(/(?:^|, )(\d+) xfailed/.exec(s)) + num(/(?:^|, )(\d+) deselected/.exec(s)),
      format: 'pytest',
    };
  }
  // mocha: "  3 passing (12ms)", "  1 failing"
  const mocha = last(/^\s+(\d+) passing \(/m);
  if (mocha) return { passed: num(mocha), failed: num(last(/^\s+(\d+) failing$/m)), skipped: num(last(/^\s+(\d+) pending$/m)), format: 'mocha' };
  // cargo: "test result: FAILED. 3 passed; 1 failed; 0 ignored"
  const cargo = last(/^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/m);
  if (cargo) return { passed: num(cargo, 1), failed: num(cargo, 2), skipped: num(cargo, 3), format: 'cargo' };
  // go test -v: "--- PASS: TestX", "--- FAIL: TestY"
  const goPass = [...text.matchAll(/^\s*--- PASS: /gm)].length;
  const goFail = [...text.matchAll(/^\s*--- FAIL: /gm)].length;
  if (goPass + goFail > 0) return { passed: goPass, failed: goFail, skipped: [...text.matchAll(/^\s*--- SKIP: /gm)].length, format: 'go' };
  return null;
}

/** What a test run records (`tests` of its result) and how its first line reads. */
export interface TestRun {
  /** The run passed: exited 0 in time (what makes its tool result an error or not). */
  ok: boolean;
  tests: { passed: number; failed: number; skipped: number };
  summary: string;
}

/**
 * A test run as recorded, from its counts and how it ended. The exit code has the last word: a
 * run that failed records at least one failure even when its counts show none (a test file that
 * did not load, a runner that crashed after its tests, a timeout) — a suite that does not pass
 * never reads "0 failed". A run that passed without recognisable counts records 0 failed (it
 * passed), so an earlier run's failures do not stand for it. Pure.
 */
export function testRun(counts: TestCounts | null, end: { exitCode: number | null; timedOut: boolean }): TestRun {
  const passed = end.exitCode === 0 && !end.timedOut;
  const verdict = end.timedOut ? 'tests timed out' : passed ? 'tests passed' : 'tests failed';
  if (!counts) {
    return passed
      ? { ok: true, tests: { passed: 0, failed: 0, skipped: 0 }, summary: `${verdict} (no pass/fail counts recognised)` }
      : { ok: false, tests: { passed: 0, failed: 1, skipped: 0 }, summary: `${verdict} (no pass/fail counts recognised: counted as 1 failed)` };
  }
  const unexplained = !passed && counts.failed === 0;
  const failed = unexplained ? Math.max(1, counts.failedFiles ?? 0) : counts.failed;
  const why = !unexplained ? '' : counts.failedFiles ? ` — ${counts.failedFiles} test ${counts.failedFiles === 1 ? 'file' : 'files'} failed without a failed test (did not load?)` : end.timedOut ? ' — counted as 1 failed' : ` — the runner exited with ${end.exitCode ?? 'a signal'} although no test failed: counted as 1 failed`;
  return {
    ok: passed,
    tests: { passed: counts.passed, failed, skipped: counts.skipped },
    summary: `${verdict}: ${counts.passed} passed, ${failed} failed${counts.skipped ? `, ${counts.skipped} skipped` : ''} (${counts.format})${why}`,
  };
}
