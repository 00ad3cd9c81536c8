import { describe, expect, it } from 'vitest';
import { briefSummary, BRIEF_SUMMARY_MAX, cleanText, cutText, formatBytes, lastText, oneLine, textProblems } from './text.ts';

describe('cutting text', () => {
  // Half a character (a lone surrogate) cannot be stored: Postgres refused it in JSON, failing a submit with a 500 or a step until its run failed.
  const whole = (s: string): boolean => s.isWellFormed();
  it('never keeps half of a character, at either end, and keeps everything that fits', () => {
    const text = `${'a'.repeat(198)}😀${'b'.repeat(10)}`;
    expect(cutText(text, 199)).toBe('a'.repeat(198));
    expect(cutText(text, 200)).toBe(`${'a'.repeat(198)}😀`);
    expect(cutText('short', 10)).toBe('short');
    expect(lastText(`😀${'b'.repeat(10)}`, 11)).toBe('b'.repeat(10));
    expect(lastText(`😀${'b'.repeat(10)}`, 12)).toBe(`😀${'b'.repeat(10)}`);
    for (let n = 1; n < 40; n++) {
      const emoji = '😀👩‍👩‍👧‍👦🇫🇷漢𠀋'.repeat(5);
      expect([cutText(emoji, n), lastText(emoji, n), oneLine(emoji, n), briefSummary(emoji, n)].every(whole), String(n)).toBe(true);
    }
    expect(oneLine(`${'a'.repeat(78)}😀 tail`, 80)).toBe(`${'a'.repeat(78)}…`);
  });
});

describe('textProblems', () => {
  it('names every string with a NUL or a lone surrogate, at any depth, keys too', () => {
    const value = JSON.parse(String.raw`{"prompt":"a\u0000b","ok":"fine 😀","input":{"subtasks":[{"title":"x"},{"title":"\ud800"}]},"k\u0000ey":1,"both":"\u0000\udc00"}`);
    expect(textProblems(value, 'body')).toEqual([
      { path: 'body.prompt', problem: 'nul' },
      { path: 'body.input.subtasks.1.title', problem: 'lone_surrogate' },
      { path: 'body.k\u2400ey', problem: 'nul' },
      { path: 'body.both', problem: 'nul' },
      { path: 'body.both', problem: 'lone_surrogate' },
    ]);
    expect(textProblems('\udfff')).toEqual([{ path: '', problem: 'lone_surrogate' }]);
    expect(textProblems({ a: ['x', 1, null, true, { b: 'y' }], e: '😀 \ud83d\ude00' })).toEqual([]);
  });

  it('walks nesting deeper than the call stack', () => {
    const deep = JSON.parse(`${'['.repeat(200_000)}"\\u0000"${']'.repeat(200_000)}`);
    expect(textProblems(deep)).toEqual([{ path: Array(200_000).fill('0').join('.'), problem: 'nul' }]);
  });
});

describe('cleanText', () => {
  it('replaces NUL with ␀ and lone surrogates with U+FFFD, counting them; keeps pairs', () => {
    expect(cleanText('a\u0000b\u0000')).toEqual({ value: 'a\u2400b\u2400', replaced: 2 });
    expect(cleanText('x\ud800y\udc00z\ud83d\ude00')).toEqual({ value: 'x\ufffdy\ufffdz\ud83d\ude00', replaced: 2 });
    expect(cleanText('\ud800')).toEqual({ value: '\ufffd', replaced: 1 });
  });

  it('cleans arrays and objects deeply, keys too; what needs nothing is returned as it is', () => {
    const input = { 'k\u0000': ['ok', { t: '\udc00', n: 3 }], same: { s: 'fine' } };
    const { value, replaced } = cleanText(input);
    expect(replaced).toBe(2);
    expect(value).toEqual({ 'k\u2400': ['ok', { t: '\ufffd', n: 3 }], same: { s: 'fine' } });
    expect(value.same).toBe(input.same);
    expect(textProblems(value)).toEqual([]);
    const clean = { a: ['b'], n: 1, d: null };
    expect(cleanText(clean).value).toBe(clean);
    expect(cleanText(42)).toEqual({ value: 42, replaced: 0 });
  });
});

describe('formatBytes', () => {
  it('says a byte count in binary units, whole numbers whole', () => {
    expect([0, 1023, 1024, 1536, 10 * 1024 * 1024, 1.25 * 1024 ** 3, 5 * 1024 ** 4].map(formatBytes)).toEqual(['0 bytes', '1023 bytes', '1 KiB', '1.5 KiB', '10 MiB', '1.3 GiB', '5120 GiB']);
  });
});

describe('briefSummary', () => {
  it("an agent's summary reaches another agent whole up to the limit, else its start and how much was left out (twenty 30,000-character summaries had made a 600 KB reviewer's request)", () => {
    expect(briefSummary('done: tests pass')).toBe('done: tests pass');
    const long = 'x'.repeat(30_000);
    expect(briefSummary(long)).toBe(`${'x'.repeat(BRIEF_SUMMARY_MAX)}\n[… ${30_000 - BRIEF_SUMMARY_MAX} more characters of this summary left out]`);
  });
});
