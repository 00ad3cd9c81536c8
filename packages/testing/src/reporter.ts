import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** How much of an unhandled error's stack the closing lines repeat. */
const STACK_LINES = 12;

/**
 * Prints the plain closing line CI reads: "vitest: N passed, N failed, N skipped" — and under
 * it each unhandled error again (what, where, the top of its stack). Vitest prints those far
 * above, among the tests' output; CI keeps the end of the log, so an unhandled error that
 * fails a run whose tests all passed is named where it will be read.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown> = []): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failed++;
        else skipped++;
      }
      if (m.state() === 'failed' && [...m.children.allTests()].length === 0) failed++;
    }
    process.stdout.write(`\nvitest: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    unhandledErrors.forEach((e, i) => process.stdout.write(describeUnhandled(e, `${i + 1} of ${unhandledErrors.length}`)));
  }
}

/** An unhandled error as vitest hands it over (serialized from the worker), in a few plain lines. */
export function describeUnhandled(e: unknown, which: string, root = process.cwd()): string {
  const err = (typeof e === 'object' && e !== null ? e : { message: String(e) }) as {
    name?: unknown;
    message?: unknown;
    stack?: unknown;
    VITEST_TEST_PATH?: unknown;
    VITEST_TEST_NAME?: unknown;
  };
  const where = [
    typeof err.VITEST_TEST_PATH === 'string' ? `in ${relative(root, err.VITEST_TEST_PATH)}` : null,
    typeof err.VITEST_TEST_NAME === 'string' ? `at or after "${err.VITEST_TEST_NAME}"` : null,
  ].filter(Boolean);
  const head = `${typeof err.name === 'string' ? err.name : 'Error'}: ${typeof err.message === 'string' ? err.message : String(err.message)}`;
  const stack = typeof err.stack === 'string' ? err.stack.split('\n').filter((l) => /^\s+at /.test(l)).slice(0, STACK_LINES) : [];
  return [`vitest: unhandled error ${which}${where.length ? ` (${where.join(', ')})` : ''}: ${head}`, ...stack.map((l) => `  ${l.trim()}`)].join('\n') + '\n';
}
