import { createServer } from 'node:net';
import { ensureDatabase } from '@baton/db';
import pg from 'pg';
import type { BatonClient } from '@baton/client';
import { pollUntil } from './poll.ts';

/** Helpers for scripts that run the services as processes (bench, chaos). */

/** Drop and re-create database `name` next to `baseUrl`'s; returns its URL. */
export async function freshDatabase(baseUrl: string, name: string): Promise<string> {
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  const admin = new URL(baseUrl);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  c.on('error', () => {}); // a lost connection fails the statement in flight; it must not kill the process
  await c.connect();
  await c.query(`drop database if exists ${name} with (force)`).finally(() => c.end());
  await ensureDatabase(u.toString());
  return u.toString();
}

/** The gateway ready and the bus's streams there (a worker made them): the gateway alone is ready before any worker starts. */
export async function waitReady(api: BatonClient): Promise<void> {
  await pollUntil(async () => (await api.request<{ checks: { bus?: string } }>('GET', '/readyz')).checks.bus === 'ok', { timeoutMs: 60_000, intervalMs: 100, onTimeout: () => new Error('services did not become ready within 60 s') });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function dropDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  c.on('error', () => {}); // a lost connection fails the statement in flight; it must not kill the process
  await c.connect();
  await c.query(`drop database if exists ${name} with (force)`).finally(() => c.end());
}
