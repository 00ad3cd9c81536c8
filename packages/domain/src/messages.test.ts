import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import './messages.ts';

const said = (schema: z.ZodType, value: unknown): string[] => {
  const r = schema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe("zod's messages, in plain words", () => {
  it('a missing field is required; a wrong type says what it must be; sizes say their unit and bound', () => {
    const s = z.object({ prompt: z.string(), answers: z.array(z.string()).min(1), name: z.string().min(1).max(3), n: z.number().int().min(2).max(5), ok: z.boolean(), o: z.object({}).optional() });
    expect(said(s, { answers: [], name: '', n: 1, ok: 'yes', o: 1 })).toEqual([
      'prompt: required',
      'answers: must have at least 1 item',
      'name: must not be empty',
      'n: must be at least 2',
      'ok: must be a boolean',
      'o: must be an object',
    ]);
    expect(said(s, { prompt: 'p', answers: ['a'], name: 'abcd', n: 6, ok: true })).toEqual(['name: must have at most 3 characters', 'n: must be at most 5']);
    expect(said(z.string().min(2), 'a')).toEqual([': must have at least 2 characters']);
    expect(said(z.number().gt(0), 0)).toEqual([': must be more than 0']);
    expect(said(z.strictObject({ a: z.string() }), { a: 'x', b: 1, c: 2 })).toEqual([": unknown fields 'b', 'c'"]);
  });
  it("a schema's own words stand", () => {
    expect(said(z.string().min(1, 'say something'), '')).toEqual([': say something']);
    expect(said(z.enum(['a', 'b']), 'c')).toEqual([': Invalid option: expected one of "a"|"b"']);
  });
});
