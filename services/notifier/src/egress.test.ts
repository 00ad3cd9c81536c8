import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicOnlyLookup, webhookAgent, type Resolve } from './egress.ts';
import { deliver } from './webhook.ts';

/** A receiver on loopback: what a webhook must not reach unless private networks are allowed. */
let server: Server;
let port = 0;
let received = 0;
beforeAll(async () => {
  server = createServer((_req, res) => (received++, res.end('ok')));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise((r) => server.close(r)));

const v4 = (...addresses: string[]) => addresses.map((address) => ({ address, family: 4 }));
const post = async (url: string, resolve?: Resolve) => {
  const agent = webhookAgent({ allowPrivateNetworks: false, ...(resolve ? { resolve } : {}) });
  try {
    return await deliver(url, {}, '{}', 5000, agent);
  } finally {
    await agent.close();
  }
};

describe('webhook egress guard', () => {
  it('refuses literal loopback, private, link-local/metadata and IPv6 local addresses, in any spelling WHATWG parses', async () => {
    const before = received;
    for (const url of [`http://127.0.0.1:${port}/x`, `http://2130706433:${port}/`, `http://0x7f.1:${port}/`, `http://127.1:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`, 'http://10.1.2.3/', 'http://172.20.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/', 'http://[fd00::1]/', 'http://[fe80::1]/', 'http://0.0.0.0/', 'http://[::ffff:10.0.0.1]/']) {
      const r = await post(url);
      expect(r.ok, url).toBe(false);
      expect(r.error, url).toMatch(/^webhook address \S+ is a non-public address \(set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it\)$/);
    }
    expect(received).toBe(before);
  });

  it('refuses a name if any address it resolves to is non-public, and names the host', async () => {
    const before = received;
    const r = await post(`http://hooks.example.test:${port}/h`, async () => v4('93.184.216.34', '127.0.0.1'));
    expect(r.error).toBe('webhook host hooks.example.test resolves to 127.0.0.1, a non-public address (set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it)');
    expect((await post(`http://localhost:${port}/`)).error).toMatch(/^webhook host localhost resolves to (127\.0\.0\.1|::1), a non-public address/);
    expect(received).toBe(before);
  });

  it('connects to the addresses it checked: a name that answers differently the second time (DNS rebinding) cannot reach a private one', async () => {
    // The guard used to resolve to check, then let the request resolve again: a rebinding name
    // answered a public address to the check and loopback to the request. The connection now
    // takes the checked answer itself — one resolution per connection, and the public first
    // answer is what is dialled (unreachable from here: the delivery fails or times out without
    // reaching the loopback receiver the second answer names).
    const before = received;
    let lookups = 0;
    const resolve: Resolve = async () => (lookups++ === 0 ? v4('8.8.8.8') : v4('127.0.0.1'));
    const agent = webhookAgent({ allowPrivateNetworks: false, resolve });
    const r = await deliver(`http://rebind.example.test:${port}/`, {}, '{}', 1000, agent);
    await agent.destroy();
    expect(lookups).toBe(1);
    expect(r.ok).toBe(false);
    expect(r.error).not.toContain('127.0.0.1');
    expect(received).toBe(before);
  });

  it('honours the family a connection asks for, and says when the name has none of it', async () => {
    const lookup = publicOnlyLookup(async () => [{ address: '2606:4700::1', family: 6 }, { address: '93.184.216.34', family: 4 }]);
    const one = await new Promise<[unknown, unknown, unknown]>((r) => lookup('h.example', { family: 4 }, (...a) => r(a as [unknown, unknown, unknown])));
    expect(one).toEqual([null, '93.184.216.34', 4]);
    const all = await new Promise<[unknown, unknown]>((r) => lookup('h.example', { all: true }, (...a) => r(a as [unknown, unknown])));
    expect(all).toEqual([null, [{ address: '2606:4700::1', family: 6 }, { address: '93.184.216.34', family: 4 }]]);
    const none = await new Promise<Error | null>((r) => publicOnlyLookup(async () => v4('93.184.216.34'))('h.example', { family: 6 }, (err) => r(err)));
    expect(none?.message).toBe('h.example has no IPv6 address');
  });

  it('lets everything through when private networks are allowed (development)', async () => {
    const agent = webhookAgent({ allowPrivateNetworks: true });
    const before = received;
    expect((await deliver(`http://127.0.0.1:${port}/`, {}, '{}', 5000, agent)).ok).toBe(true);
    await agent.close();
    expect(received).toBe(before + 1);
  });
});
