/**
 * The length of the JSON text a value was parsed from or serialized to, where this process had
 * that text anyway (a read's jsonb parsed, an append's data serialized): the task caches size
 * an event by it without serializing it again. Kept by the value itself (weakly).
 */
const lengths = new WeakMap<object, number>();

/** Remember `value`'s JSON text length (values that are not objects are not remembered). */
export function rememberJsonLength(value: unknown, length: number): void {
  if (value !== null && typeof value === 'object') lengths.set(value, length);
}

/** `value`'s JSON text length: remembered, or worked out now. */
export function jsonLength(value: unknown): number {
  return (value !== null && typeof value === 'object' ? lengths.get(value) : undefined) ?? JSON.stringify(value)?.length ?? 0;
}
