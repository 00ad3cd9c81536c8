import { describe, expect, it } from 'vitest';
import { withoutTokens } from './app.ts';

describe('withoutTokens (request logs)', () => {
  it("replaces each token parameter's value, however its name is spelled, and nothing else", () => {
    expect(withoutTokens('/mail/decide?token=v1.abc.def&x=1')).toBe('/mail/decide?token=[redacted]&x=1');
    expect(withoutTokens('/mail/answer?%74oken=v1.abc')).toBe('/mail/answer?%74oken=[redacted]');
    expect(withoutTokens('/mail/file?x=1;TOKEN=v1.abc&token=v1.b')).toBe('/mail/file?x=1;TOKEN=[redacted]&token=[redacted]');
    expect(withoutTokens('/mail/file?tokens=1&%E0%A4%A=2')).toBe('/mail/file?tokens=1&%E0%A4%A=2');
    expect(withoutTokens('/v1/tasks')).toBe('/v1/tasks');
  });
});
