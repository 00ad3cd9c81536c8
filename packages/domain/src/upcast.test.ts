import { describe, expect, it } from 'vitest';
import { CURRENT_SCHEMA_VERSION } from './events.ts';
import { upcast, UnknownSchemaVersionError } from './upcast.ts';
import { canonicalJson, digestJson, uuidV5 } from './ids.ts';

describe('upcast', () => {
  it('passes current-version data through and applies registered steps in order', () => {
    expect(upcast('TaskFailed', CURRENT_SCHEMA_VERSION, { code: 'x', message: 'y' })).toEqual({ code: 'x', message: 'y' });
    const registry = { TaskFailed: { 0: (d: Record<string, unknown>) => ({ ...d, code: d.reason, reason: undefined }) } };
    expect(upcast('TaskFailed', 0, { reason: 'old' }, registry)).toMatchObject({ code: 'old' });
  });
  it('refuses data from a newer schema than this code knows', () => {
    expect(() => upcast('TaskFailed', CURRENT_SCHEMA_VERSION + 1, {})).toThrow(UnknownSchemaVersionError);
  });
});

describe('ids', () => {
  it('uuidV5 is deterministic and well-formed', () => {
    expect(uuidV5('a')).toBe(uuidV5('a'));
    expect(uuidV5('a')).not.toBe(uuidV5('b'));
    expect(uuidV5('a')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
  it('digestJson ignores key order', () => {
    expect(canonicalJson({ b: 1, a: [1, { d: 2, c: 3 }] })).toBe('{"a":[1,{"c":3,"d":2}],"b":1}');
    expect(digestJson({ a: 1, b: 2 })).toBe(digestJson({ b: 2, a: 1 }));
  });
});
