import { createHash, timingSafeEqual } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { within, type Logger } from '@baton/runtime';
import { apiKeyProblems, parseApiKeys } from './config.ts';

/** The API keys a gateway checks requests against. */
export interface ApiKeys {
  /** key → tenant, as they are now (a new map when they change). */
  current(): ReadonlyMap<string, string>;
  /** Every request needs a key, even while there are none (a keys file): the API is never open. */
  readonly required: boolean;
}

/** A key in force: its bytes, tenant and actor. */
export interface IndexedKey {
  key: Buffer;
  tenant: string;
  actor: string;
}

/** The keys in force as the auth hook, the streams and the mail pages use them: how many, the one a request names, the actors and tenants of all. */
export interface KeyIndex {
  size: number;
  /** The key `given` is, compared in constant time; looked up by its digest (one lookup, however many keys: it had been a scan of all). */
  find(given: Buffer): IndexedKey | undefined;
  actors: ReadonlySet<string>;
  /** The tenants that have a key. */
  tenants: ReadonlySet<string>;
}

const digestOf = (key: Buffer | string): string => createHash('sha256').update(key).digest('base64');

/** `source`'s keys indexed, made again only when they change (a keys file read again). */
export function keyIndex(source: ApiKeys): () => KeyIndex {
  let of: ReadonlyMap<string, string> | null = null;
  let index: KeyIndex = { size: 0, find: () => undefined, actors: new Set(), tenants: new Set() };
  return () => {
    const now = source.current();
    if (now !== of) {
      of = now;
      const byDigest = new Map([...now].map(([k, tenant]): [string, IndexedKey] => [digestOf(k), { key: Buffer.from(k), tenant, actor: keyActor(k, tenant) }]));
      const find = (given: Buffer): IndexedKey | undefined => {
        const hit = byDigest.get(digestOf(given));
        return hit && hit.key.length === given.length && timingSafeEqual(hit.key, given) ? hit : undefined;
      };
      index = { size: byDigest.size, find, actors: new Set([...byDigest.values()].map((k) => k.actor)), tenants: new Set(now.values()) };
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
  // Said once: a file anybody on the host may write lets them give themselves a key.
  let warned = false;
  const writable = (mode: number): void => {
    if (warned) return;
    warned = true;
    log.warn({ file, mode: (mode & 0o777).toString(8) }, 'BATON_API_KEYS_FILE may be written by anyone on this host: they could give themselves a key (chmod o-w)');
  };
  let text: string;
  try {
    text = await readKeysFile(file, writable);
  } catch (err) {
    throw new ApiKeysFileError(file, unreadable(err));
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
      now = await readKeysFile(file, writable);
    } catch (err) {
      const why = unreadable(err);
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
    // Named by fingerprint, at most LOGGED_CHANGES each way (a file of thousands had made one line of megabytes), with how many in all.
    const changed = (m: ReadonlyMap<string, string>, other: ReadonlyMap<string, string>) => [...m].filter(([k, t]) => other.get(k) !== t);
    const [added, revoked] = [changed(next, keys), changed(keys, next)];
    const named = (pairs: [string, string][]) => pairs.slice(0, LOGGED_CHANGES).map(([k, t]) => keyActor(k, t));
    log.info({ file, keys: next.size, added: named(added), revoked: named(revoked), ...(added.length > LOGGED_CHANGES || revoked.length > LOGGED_CHANGES ? { addedCount: added.length, revokedCount: revoked.length } : {}) }, 'API keys reloaded');
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
  // (A read that never ends — a hung network mount — fails its look after READ_TIMEOUT_MS: readKeysFile; the next look tries again.)
  timer.unref();
  return { current: () => keys, required: true, stop: () => clearInterval(timer) };
}

/** The largest keys file read (1 MiB: some 15,000 keys); a larger one is refused, not read. */
export const MAX_KEYS_FILE_BYTES = 1024 * 1024;
/** How long one read of the keys file may take. */
const READ_TIMEOUT_MS = 5000;
/** Fingerprints named per reload, each way. */
const LOGGED_CHANGES = 50;

/**
 * The keys file's text, if it is a regular file (after symlinks) of at most MAX_KEYS_FILE_BYTES,
 * read within READ_TIMEOUT_MS (a hung network mount can still hold the open: the look fails, the next tries again). A FIFO had been opened and waited on for ever — no reload after
 * it, and a gateway that SIGTERM no longer stopped —, /dev/zero read without end, and a file of
 * 126 MB froze the gateway and took 3 GB. One anybody on the host may write is told to `writable`.
 */
async function readKeysFile(file: string, writable: (mode: number) => void): Promise<string> {
  return within(READ_TIMEOUT_MS, async () => {
    // Opened without blocking (a FIFO opens at once instead of waiting for a writer, holding a
    // thread of the pool for good), then the file opened is the one checked (fstat: a symlink
    // swapped between a check by path and the read had got a FIFO or /dev/zero through), and
    // no more than the limit is read from it.
    const fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new Error('not a regular file (a FIFO, a device or a directory is not read)');
      if (st.size > MAX_KEYS_FILE_BYTES) throw new Error(`${st.size} bytes, over the ${MAX_KEYS_FILE_BYTES} a keys file may hold`);
      if ((st.mode & 0o002) !== 0) writable(st.mode);
      const buffer = Buffer.alloc(MAX_KEYS_FILE_BYTES + 1);
      let length = 0;
      for (;;) {
        const { bytesRead } = await fh.read(buffer, length, buffer.length - length, null);
        if (bytesRead === 0) break;
        length += bytesRead;
        if (length > MAX_KEYS_FILE_BYTES) throw new Error(`over the ${MAX_KEYS_FILE_BYTES} bytes a keys file may hold (it grew while read)`);
      }
      return buffer.subarray(0, length).toString('utf8');
    } finally {
      await fh.close();
    }
  }, `no answer within ${READ_TIMEOUT_MS} ms (a hung mount?)`);
}

const unreadable = (err: unknown): string => {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `cannot be read (${code})` : `cannot be used: ${(err as Error).message}`;
};
