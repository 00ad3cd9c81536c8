import { HttpError } from './errors.ts';

/**
 * How deeply a request's JSON may nest arrays and objects. JSON.parse takes any depth, but
 * JSON.stringify (digests, metadata's size check, storing) overflows the stack at a few
 * thousand levels: a limit far above any real body keeps that a 400 instead of a 500.
 */
export const MAX_JSON_DEPTH = 64;

/** A 400 naming the first place `value` nests deeper than `max` levels (null: it does not). Walks with a stack of its own. */
export function jsonDepthError(value: unknown, where: string, max = MAX_JSON_DEPTH): HttpError | null {
  const stack: [unknown, string, number][] = [[value, where, 0]];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const [v, path, depth] = item;
    if (typeof v !== 'object' || v === null) continue;
    if (depth === max) {
      return new HttpError(400, 'validation_error', `${path}: nested more than ${max} levels deep`, [{ field: path, message: `nested more than ${max} levels deep` }]);
    }
    for (const [k, child] of Object.entries(v)) stack.push([child, `${path}.${k}`, depth + 1]);
  }
  return null;
}
