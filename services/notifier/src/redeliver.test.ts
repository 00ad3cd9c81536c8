import { Writable } from 'node:stream';
import type { Logger } from '@baton/runtime';
import { waitFor } from '@baton/testing';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { webhookAgent } from './egress.ts';
import { startRedeliveries, type RedeliveryDeps } from './redeliver.ts';

describe('the redelivery loop while Postgres is away', () => {
  it('says so in one warning line (no stack), then quietly looks again', async () => {
    const lines: { level: number; msg: string; err?: unknown }[] = [];
    const log = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (lines.push(JSON.parse(String(c))), cb()) })) as unknown as Logger;
    let looks = 0;
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const pool = { query: async () => (looks++, Promise.reject(refused)) } as unknown as RedeliveryDeps['pool'];
    const r = startRedeliveries({ pool, log, everyMs: 5, leaseMs: 1000, mail: null, timeoutMs: 1000, now: () => new Date(), agent: webhookAgent({ allowPrivateNetworks: true }), secret: 's', store: {} as RedeliveryDeps['store'] });
    await waitFor(() => looks >= 3, { what: 'three looks' });
    await r.stop();
    expect(lines.map((l) => [l.level, l.msg])).toEqual([[40, 'redeliveries: Postgres unreachable; looking again each second (further failures in a row at debug)']]);
    expect(lines[0]?.err).toBeUndefined();
  });
});
