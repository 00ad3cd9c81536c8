import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Logger } from '@baton/runtime';
import { apiKeyProblems, parseApiKeys } from './config.ts';

/** The API keys a gateway checks requests against. */
export interface ApiKeys {
  /** key → tenant, as they are now (a new map when they change). */
  current(): ReadonlyMap<string, string>;
  /** Every request needs a key, even while there are none (a keys file): the API is never open. */
  readonly required: boolean;
}

/** The keys in force as the auth hook and the streams use them: each key's bytes, tenant and actor; the actors of all. */
export interface KeyIndex {
  keys: { key: Buffer; tenant: string; actor: string }[];
  actors: ReadonlySet<string>;
}

/** `source`'s keys indexed, made again only when they change (a keys file read again). */
export function keyIndex(source: ApiKeys): () => KeyIndex {
  let of: ReadonlyMap<string, string> | null = null;
  let index: KeyIndex = { keys: [], actors: new Set() };
  return () => {
    const now = source.current();
    if (now !== of) {
      of = now;
      const keys = [...now].map(([k, tenant]) => ({ key: Buffer.from(k), tenant, actor: keyActor(k, tenant) }));
      index = { keys, actors: new Set(keys.map((k) => k.actor)) };
    }
    return index;
  };
}

/**
 * An API key's name in the log (`decidedBy`, `requestedBy`, the trace's `baton.actor`): the first
 * 8 hex digits of its SHA-256 — tells a tenant's keys apart and gives nothing of the key away.
 * The operator finds it with `printf %s "$KEY" | sha256sum | cut -c1-8`.
 */
export function keyFingerprint(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** Who a request with this key is, in the log and in events: `key:<fingerprint>@<tenant>`. */
export const keyActor = (key: string, tenant: string): string => `key:${keyFingerprint(key)}@${tenant}`;

/** Keys fixed for the process's life (BATON_API_KEYS): none is an open API. */
export const fixedApiKeys = (keys: ReadonlyMap<string, string>): ApiKeys => ({ current: () => keys, required: keys.size > 0 });

/** A keys file that cannot be used at start: its path and why. */
export class ApiKeysFileError extends Error {
  constructor(file: string, why: string) {
    super(`BATON_API_KEYS_FILE: ${file}: ${why}`);
    this.name = new.target.name;
  }
}

/**
 * Keys from a file (BATON_API_KEYS_FILE), read again every `intervalMs` and put in force when
 * its content changed, is valid, and read the same twice in a row — a file rewritten in place is
 * empty or half there for a moment (all keys revoked, every stream cut; a tenant's name cut
 * short). A key added or revoked without a restart (a Kubernetes secret mounted as a volume is
 * swapped in place). A change that cannot be read or is invalid keeps the keys in force, logged
 * with each problem (never a key); an empty file refuses every request. At start the file must
 * be readable and valid (ApiKeysFileError).
 */
export async function apiKeysFile(file: string, log: Pick<Logger, 'info' | 'warn' | 'error'>, intervalMs: number): Promise<ApiKeys & { stop(): void }> {
  const read = async (): Promise<string> => readFile(file, 'utf8');
  let text: string;
  try {
    text = await read();
  } catch (err) {
    throw new ApiKeysFileError(file, `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const problems = apiKeyProblems(text);
  if (problems.length > 0) throw new ApiKeysFileError(file, problems.join('; '));
  let keys: ReadonlyMap<string, string> = parseApiKeys(text);
  if (keys.size === 0) log.warn({ file }, 'BATON_API_KEYS_FILE holds no keys: every API request is refused (401) until it does');
  /** A change read once: in force if the next read finds the same. */
  let pending: string | null = null;
  let reported = '';
  const look = async (): Promise<void> => {
    let now: string;
    try {
      now = await read();
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      if (why !== reported) log.warn({ file, err: why }, 'BATON_API_KEYS_FILE cannot be read: the keys in force are kept');
      reported = why;
      return;
    }
    if (now === text) {
      // Back to the keys in force (an edit undone): nothing pending, and a later problem is said again.
      pending = null;
      reported = '';
      return;
    }
    if (now !== pending) {
      pending = now;
      return;
    }
    pending = null;
    const wrong = apiKeyProblems(now);
    if (wrong.length > 0) {
      const why = wrong.join('; ');
      if (why !== reported) log.error({ file, problems: wrong }, 'BATON_API_KEYS_FILE changed but is invalid: the keys in force are kept');
      reported = why;
      return;
    }
    const next = parseApiKeys(now);
    const fingerprints = (m: ReadonlyMap<string, string>, other: ReadonlyMap<string, string>) => [...m].filter(([k, t]) => other.get(k) !== t).map(([k, t]) => keyActor(k, t));
    log.info({ file, keys: next.size, added: fingerprints(next, keys), revoked: fingerprints(keys, next) }, 'API keys reloaded');
    keys = next;
    text = now;
    reported = '';
  };
  let looking = false;
  const timer = setInterval(() => {
    if (looking) return;
    looking = true;
    void look().finally(() => {
      looking = false;
    });
  }, intervalMs);
  timer.unref();
  return { current: () => keys, required: true, stop: () => clearInterval(timer) };
}
