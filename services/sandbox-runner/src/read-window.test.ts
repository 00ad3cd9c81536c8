import { describe, expect, test } from 'vitest';
import { MAX_READ_CHARS, MAX_READ_LINES, readWindow } from './tools.ts';

const numbered = (n: number, width = 10): string => Array.from({ length: n }, (_, i) => `line ${String(i + 1).padStart(width, '0')}`).join('\n') + '\n';

describe('readWindow (what read_file shows)', () => {
  test('a file that fits is shown whole, exactly (before: anything past 4,000 characters was cut to its first 1,000 and last 3,000)', () => {
    const text = numbered(500); // ~10,000 characters
    expect(readWindow(text)).toBe(text);
    expect(readWindow('no newline at the end')).toBe('no newline at the end');
    expect(readWindow('')).toBe('');
  });

  test('a long file comes a window at a time, saying which lines and where to read on; the windows put together are the file', () => {
    const text = numbered(5000);
    const first = readWindow(text);
    expect(first.endsWith(`\n[read_file: lines 1–${MAX_READ_LINES} of 5000; read on with offset ${MAX_READ_LINES + 1}]`)).toBe(true);
    let rebuilt = '';
    let offset: number | undefined;
    for (;;) {
      const w = readWindow(text, offset);
      const m = /\n\[read_file: lines (\d+)–(\d+) of 5000(?:; read on with offset (\d+))?\]$/.exec(w);
      expect(m).not.toBeNull();
      rebuilt += `${w.slice(0, m?.index)}\n`;
      if (!m?.[3]) break;
      offset = Number(m[3]);
    }
    expect(rebuilt).toBe(text);
  });

  test('offset and limit choose the window; past the end is an error naming the length; characters bound a window too', () => {
    const text = numbered(30);
    expect(readWindow(text, 10, 2)).toBe('line 0000000010\nline 0000000011\n[read_file: lines 10–11 of 30; read on with offset 12]');
    expect(readWindow(text, 29)).toBe('line 0000000029\nline 0000000030\n[read_file: lines 29–30 of 30]');
    expect(() => readWindow(text, 31)).toThrow('offset 31 is past the end: the file has 30 lines');
    const wide = numbered(100, 1000); // ~1,000 characters a line
    const w = readWindow(wide);
    expect(w.length).toBeLessThan(MAX_READ_CHARS + 100);
    expect(w).toMatch(/\n\[read_file: lines 1–39 of 100; read on with offset 40\]$/);
    const oneLine = 'x'.repeat(MAX_READ_CHARS * 2);
    expect(readWindow(oneLine)).toBe(`${'x'.repeat(MAX_READ_CHARS)}\n[read_file: line 1 of 1, its first ${MAX_READ_CHARS} characters of ${MAX_READ_CHARS * 2} (the rest of it: run_command, e.g. cut -c40001-80000)]`);
    // An empty file has no lines.
    expect(readWindow('')).toBe('');
    expect(() => readWindow('', 2)).toThrow('offset 2 is past the end: the file has 0 lines');
  });
});
