import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * SSRF guard for webhook deliveries: a webhook URL may not reach loopback, private,
 * link-local (cloud metadata), CGNAT or other non-public addresses, unless the deployment
 * allows it (development). Checked at delivery time, on every address the name resolves to.
 */
const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) blocked.addSubnet(net, bits, 'ipv6');

export class EgressDeniedError extends Error {
  constructor(url: string, address: string) {
    super(`webhook URL ${url} resolves to ${address}, a non-public address (set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it)`);
    this.name = new.target.name;
  }
}

export async function assertPublicUrl(url: string, resolve: (host: string) => Promise<string[]> = defaultResolve): Promise<void> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [host] : await resolve(host);
  for (const a of addresses) {
    // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged by the IPv4 address inside it.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a)?.[1];
    const ip = mapped ?? a;
    if (blocked.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4')) throw new EgressDeniedError(url, a);
  }
}

async function defaultResolve(host: string): Promise<string[]> {
  return (await lookup(host, { all: true })).map((r) => r.address);
}
