/**
 * A page's keyset cursor, opaque to clients: the last row's time and id. The time is kept as
 * Postgres wrote it (to the microsecond where the column has them): a cursor cut to the
 * millisecond would skip the rows of the same millisecond that sort after it.
 */
export class InvalidCursorError extends Error {
  constructor() {
    super('cursor is not one this API returned');
    this.name = new.target.name;
  }
}

export function encodeCursor(at: string, id: string): string {
  return Buffer.from(JSON.stringify([at, id])).toString('base64url');
}

/** The time and id a cursor holds; anything else is an InvalidCursorError (a 400 naming `query.cursor`). */
export function decodeCursor(cursor: string): { at: string; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as [string, string];
    if (typeof at !== 'string' || typeof id !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/.test(at) || Number.isNaN(Date.parse(at)) || !/^[0-9a-f-]{36}$/i.test(id)) throw new Error();
    return { at, id };
  } catch {
    throw new InvalidCursorError();
  }
}

/** SQL for a timestamptz column as a cursor's time: UTC, to the microsecond. */
export const cursorTime = (column: string): string => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
