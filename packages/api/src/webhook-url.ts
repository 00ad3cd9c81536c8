import { BlockList, isIP } from 'node:net';

/**
 * Which webhook URLs can be delivered: the one address classification of the gateway (at
 * registration, on the URL as written) and the notifier (at delivery, on every address the host
 * resolves to). A webhook may not reach loopback, private, link-local (cloud metadata), CGNAT,
 * unspecified, multicast or other non-public addresses, unless the deployment allows it
 * (WEBHOOK_ALLOW_PRIVATE_NETWORKS, development).
 */
const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
// ::/96 holds :: (unspecified), ::1 (loopback) and the old IPv4-compatible addresses.
for (const [net, bits] of [['::', 96], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) blocked.addSubnet(net, bits, 'ipv6');

/** An IP address a webhook may not reach. An IPv4-mapped IPv6 address (::ffff:10.0.0.1, ::ffff:a00:1) is judged by its IPv4 address. */
export function isNonPublicAddress(ip: string): boolean {
  const version = isIP(ip);
  if (version === 0) throw new TypeError(`not an IP address: ${ip}`);
  return blocked.check(ip, version === 6 ? 'ipv6' : 'ipv4');
}

/** The URL's host as an address or name: no IPv6 brackets, no trailing dot. WHATWG parsing has already turned 2130706433, 0x7f.1, 0177.0.0.1 and 127.1 into 127.0.0.1. */
export const urlHost = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');

/**
 * Why a webhook URL can never be delivered, or null. Not http(s); credentials in it (user:pass@ —
 * never stored, and fetch refuses them); unless private networks are allowed, a literal
 * non-public address (any spelling) or localhost / *.localhost. Other names resolve at delivery.
 */
export function webhookUrlProblem(url: string, opts: { allowPrivateNetworks: boolean }): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must be an http(s) URL';
  if (u.username !== '' || u.password !== '') return 'must not carry credentials (user:password@); authenticate the delivery with its signature';
  if (opts.allowPrivateNetworks) return null;
  const host = urlHost(u);
  const local = host === 'localhost' || host.endsWith('.localhost');
  if (local || (isIP(host) !== 0 && isNonPublicAddress(host))) {
    return `names ${u.hostname}, ${local ? 'a loopback host' : 'a non-public address (loopback, private, link-local, unspecified or multicast)'}, which a webhook may not reach (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true allows it in development)`;
  }
  return null;
}

/** `text` with the credentials of every URL in it left out (`https://user:pass@host/` → `https://host/`). */
export const redactCredentials = (text: string): string => text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi, '$1');
