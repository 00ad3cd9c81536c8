import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor, InvalidCursorError } from './cursor.ts';

describe('page cursors', () => {
  it('a cursor the API wrote reads back (microseconds kept); anything else, forged or broken, is an InvalidCursorError (a 400), never a value Postgres would refuse (a 500)', () => {
    const id = '0b7c3f3e-4a51-4f4e-9d55-2d8f6f1c0a11';
    expect(decodeCursor(encodeCursor('2026-11-28T10:00:00.123456Z', id))).toEqual({ at: '2026-11-28T10:00:00.123456Z', id });
    const forged = (at: unknown, i: unknown = id) => Buffer.from(JSON.stringify([at, i])).toString('base64url');
    for (const bad of [forged('2026-02-30T00:00:00Z'), forged('0000-01-01T00:00:00Z'), forged('2026-11-28T24:00:00Z'), forged('2026-11-28T10:00:00Z', '------------------------------------'), forged('2026-11-28T10:00:00Z', 'not-a-uuid'), forged(5), 'not base64 json', ''])
      expect(() => decodeCursor(bad), bad).toThrow(InvalidCursorError);
  });
});
