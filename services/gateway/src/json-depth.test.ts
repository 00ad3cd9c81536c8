import { describe, expect, it } from 'vitest';
import { jsonDepthError, MAX_JSON_DEPTH } from './json-depth.ts';

const nest = (depth: number): unknown => JSON.parse(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);

describe('jsonDepthError', () => {
  it('allows MAX_JSON_DEPTH levels and names where a deeper value starts', () => {
    expect(jsonDepthError(nest(MAX_JSON_DEPTH), 'body')).toBeNull();
    expect(jsonDepthError({ ok: [1, { b: 'x' }], n: null }, 'body', 3)).toBeNull();
    const err = jsonDepthError({ ok: 1, deep: [[[[1]]]] }, 'body', 3);
    expect(err).toMatchObject({ status: 400, code: 'validation_error', message: 'body.deep.0.0: nested more than 3 levels deep' });
    // Far deeper than the call stack allows recursion: still answered.
    expect(jsonDepthError(JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`), 'body')?.message).toMatch(/^body(\.0){64}: nested more than 64 levels deep$/);
  });
});
