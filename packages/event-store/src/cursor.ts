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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UTC time as cursors write it, naming a real instant Postgres takes (not February 30th, not year 0). */
function realTime(at: string): boolean {
  const m = /^(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?Z$/.exec(at);
  if (!m || Number(m[1]) < 1) return false;
  const d = new Date(at);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 19) === at.slice(0, 19);
}

export function encodeCursor(at: string, id: string): string {
  return Buffer.from(JSON.stringify([at, id])).toString('base64url');
}

/** The time and id a cursor holds; anything else is an InvalidCursorError (a 400 naming `query.cursor`). */
export function decodeCursor(cursor: string): { at: string; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as [string, string];
    if (typeof at !== 'string' || typeof id !== 'string' || !realTime(at) || !UUID.test(id)) throw new Error();
    return { at, id };
  } catch {
    throw new InvalidCursorError();
  }
}

/** SQL for a timestamptz column as a cursor's time: UTC, to the microsecond. */
export const cursorTime = (column: string): string => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
