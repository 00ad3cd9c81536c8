import { describe, expect, it } from 'vitest';
import { formatLine } from './launcher.ts';
import { summarize } from './stats.ts';

describe('summarize', () => {
  it('nearest-rank percentiles', () => {
    const s = summarize(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(s).toMatchObject({ n: 100, p50: 50, p99: 99, max: 100, mean: 50.5 });
    expect(summarize([7])).toMatchObject({ p50: 7, p99: 7, max: 7 });
  });
});

describe('launcher log lines and SSE frames', () => {
  it('formats pino JSON and passes other lines through', () => {
    expect(formatLine('{"level":30,"time":0,"msg":"hello","pid":1,"hostname":"h","service":"s","taskId":"t"}')).toBe('00:00:00.000 INFO  hello {"taskId":"t"}');
    expect(formatLine('plain text')).toBe('plain text');
  });
});
