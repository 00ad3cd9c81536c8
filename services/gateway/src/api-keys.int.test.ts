import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '@baton/runtime';
import { stackTest as test, waitFor } from '@baton/testing';
import { afterEach, describe, expect } from 'vitest';
import { apiKeysFile, ApiKeysFileError, keyIndex, MAX_KEYS_FILE_BYTES } from './api-keys.ts';
import { testGateway } from './test-gateway.ts';

const A = 'key-of-acme-aaaaaaaa01';
const B = 'key-of-acme-bbbbbbbb02';

describe('API keys from a file (BATON_API_KEYS_FILE), read again as it changes', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  const keysFile = async (content: string): Promise<string> => {
    const d = await mkdtemp(path.join(tmpdir(), 'baton-keys-'));
    dirs.push(d);
    const f = path.join(d, 'api-keys');
    await writeFile(f, content);
    return f;
  };
  const logged: { level: string; o: Record<string, unknown>; msg: string }[] = [];
  const log = Object.fromEntries(['info', 'warn', 'error'].map((level) => [level, (o: Record<string, unknown>, msg: string) => logged.push({ level, o, msg })])) as unknown as Logger;

  test('a key added works and a key revoked is refused without a restart, its open event streams cut; an invalid change keeps the keys in force; an empty file refuses everything (never open)', async ({ pg, nats }) => {
    const file = await keysFile(`# acme's key\n${A}:acme\n`);
    const keys = await apiKeysFile(file, log, 50);
    const app = await testGateway(pg, nats, { apiKeys: keys });
    const listening = await testGateway(pg, nats, { apiKeys: keys, sseHeartbeatMs: 50 });
    try {
      const status = async (key?: string) => (await app.inject({ method: 'GET', url: '/v1/tasks', headers: key ? { authorization: `Bearer ${key}` } : {} })).statusCode;
      expect([await status(A), await status(B)]).toEqual([200, 401]);

      // Rotated: B in, A out (as a Kubernetes secret volume is swapped).
      await writeFile(file, `${B}:acme\n`);
      await waitFor(async () => (await status(A)) === 401 && (await status(B)) === 200, { what: 'the new key in force, the old one refused' });
      const reload = logged.find((l) => l.msg === 'API keys reloaded');
      expect(reload?.o).toMatchObject({ keys: 1, added: [expect.stringMatching(/^key:[0-9a-f]{8}@acme$/)], revoked: [expect.stringMatching(/^key:[0-9a-f]{8}@acme$/)] });
      expect(JSON.stringify(logged)).not.toContain(A.slice(0, 12)); // never a key in the log

      // A stream opened with B is cut once B is revoked (at its next heartbeat); it had gone on showing the tenant's tasks.
      await listening.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(listening.server.address() as AddressInfo).port}/v1/tasks`;
      const follow = await fetch(url, { headers: { authorization: `Bearer ${B}`, accept: 'text/event-stream' } });
      expect(follow.status).toBe(200);
      const reader = (follow.body as ReadableStream<Uint8Array>).getReader();
      const ended = (async () => {
        for (;;) if ((await reader.read()).done) return true;
      })();
      const C = 'key-of-acme-cccccccc03';
      await writeFile(file, `${C}:acme\n`);
      expect(await ended).toBe(true);
      expect((await fetch(url, { headers: { authorization: `Bearer ${B}`, accept: 'text/event-stream' } })).status).toBe(401);
      const still = await fetch(url, { headers: { authorization: `Bearer ${C}`, accept: 'text/event-stream' } });
      expect(still.status).toBe(200);
      await still.body?.cancel();
      await writeFile(file, `${B}:acme\n`);
      await waitFor(async () => (await status(B)) === 200, { what: 'B back in force' });

      // A broken edit: said, and B still works.
      await writeFile(file, `${B}:acme\nnot a pair\n`);
      await waitFor(() => logged.some((l) => l.level === 'error' && l.msg === 'BATON_API_KEYS_FILE changed but is invalid: the keys in force are kept'), { what: 'the invalid change logged' });
      expect(await status(B)).toBe(200);

      // Emptied: every request refused — a keys file never opens the API.
      await writeFile(file, '# no keys for now\n');
      await waitFor(async () => (await status(B)) === 401, { what: 'the emptied file in force' });
      expect(await status()).toBe(401);
    } finally {
      keys.stop();
      await listening.close();
      await app.close();
    }
  });

  test('only a regular file of at most 1 MiB is read: a FIFO (it had been waited on for ever — no reload after it, SIGTERM no longer stopped the gateway), a device or an oversize file is refused at start and, swapped in later, keeps the keys in force; a reload after it works; a world-writable file is warned of once; a reload of thousands names 50 each way', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'baton-keys-'));
    dirs.push(dir);
    const fifo = path.join(dir, 'fifo');
    await promisify(execFile)('mkfifo', [fifo]);
    await expect(apiKeysFile(fifo, log, 1000)).rejects.toThrow(new ApiKeysFileError(fifo, 'cannot be used: not a regular file (a FIFO, a device or a directory is not read)'));
    await expect(apiKeysFile('/dev/zero', log, 1000)).rejects.toThrow(/not a regular file/);
    const big = await keysFile(`${A}:acme\n# ${'x'.repeat(MAX_KEYS_FILE_BYTES)}\n`);
    await expect(apiKeysFile(big, log, 1000)).rejects.toThrow(new ApiKeysFileError(big, `cannot be used: ${MAX_KEYS_FILE_BYTES + A.length + 9} bytes, over the ${MAX_KEYS_FILE_BYTES} a keys file may hold`));

    const file = await keysFile(`${A}:acme\n`);
    await chmod(file, 0o666);
    const keys = await apiKeysFile(file, log, 20);
    try {
      expect(logged.filter((l) => l.msg.startsWith('BATON_API_KEYS_FILE may be written by anyone on this host'))).toEqual([{ level: 'warn', o: { file, mode: '666' }, msg: expect.stringContaining('chmod o-w') }]);
      // A FIFO renamed over it: said, the keys kept; then a regular file again is read (the looks had stopped for good).
      const swapped = path.join(dir, 'swapped');
      await promisify(execFile)('mkfifo', [swapped]);
      await rename(swapped, file);
      await waitFor(() => logged.some((l) => l.msg === 'BATON_API_KEYS_FILE cannot be read: the keys in force are kept' && l.o.file === file), { what: 'the FIFO refused' });
      expect(keys.current()).toEqual(new Map([[A, 'acme']]));
      const many = Array.from({ length: 2000 }, (_, i) => `key-of-many-${String(i).padStart(10, '0')}:globex`).join('\n');
      await writeFile(path.join(dir, 'next'), `${B}:acme\n${many}\n`);
      await rename(path.join(dir, 'next'), file);
      await waitFor(() => keys.current().get(B) === 'acme', { what: 'the regular file read again' });
      expect(keys.current().size).toBe(2001);
      const reload = logged.findLast((l) => l.msg === 'API keys reloaded')!;
      expect(reload.o).toMatchObject({ keys: 2001, addedCount: 2001, revokedCount: 1, revoked: [expect.stringMatching(/@acme$/)] });
      expect(reload.o.added).toHaveLength(50);
      // Written by anyone still: warned once, not at every look.
      expect(logged.filter((l) => l.msg.startsWith('BATON_API_KEYS_FILE may be written by anyone'))).toHaveLength(1);
      // Found by one lookup among them, compared whole.
      const index = keyIndex(keys)();
      expect(index.find(Buffer.from('key-of-many-0000001999'))?.tenant).toBe('globex');
      expect(index.find(Buffer.from('key-of-many-000000199'))).toBeUndefined();
      expect(index.find(Buffer.from(A))).toBeUndefined();
    } finally {
      keys.stop();
    }
  });

  test('at start the file must be there and valid: ApiKeysFileError naming the file and the problem, never a key', async () => {
    const missing = path.join(tmpdir(), 'baton-no-such-keys-file');
    await expect(apiKeysFile(missing, log, 1000)).rejects.toThrow(new ApiKeysFileError(missing, 'cannot be read (ENOENT)'));
    const twice = await keysFile(`${A}:acme,${A}:beta`);
    const err = await apiKeysFile(twice, log, 1000).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(ApiKeysFileError);
    expect((err as Error).message).toBe(`BATON_API_KEYS_FILE: ${twice}: pair 2 repeats the key of pair 1: a key belongs to one tenant`);
  });
});
