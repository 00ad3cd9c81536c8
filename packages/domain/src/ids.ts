import { createHash } from 'node:crypto';

/**
 * Deterministic UUIDs (RFC 9562 version 5, SHA-1 over a namespace and a name). Used where a
 * retried write must produce the same id, e.g. a task submitted twice with one Idempotency-Key.
 */
export const BATON_NAMESPACE = '6f1d2c9e-8a4b-4f7e-9c3d-2b5a1e0f7d64';

export function uuidV5(name: string, namespace: string = BATON_NAMESPACE): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = ((hash[6] as number) & 0x0f) | 0x50;
  hash[8] = ((hash[8] as number) & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Stable digest of a JSON value (object keys sorted), for comparing request bodies and tool inputs. */
export function digestJson(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/**
 * A record's own entry for a key that came from outside (a team name, a request id): never what
 * every object inherits — `constructor`, `toString`, `__proto__` are not entries.
 */
export function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
