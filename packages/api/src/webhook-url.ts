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
// ::/96 holds :: (unspecified), ::1 (loopback) and the old IPv4-compatible addresses; then unique
// local, link-local, multicast, discard-only (100::/64), local-use NAT64 (64:ff9b:1::/48, RFC 8215),
// Teredo (2001::/32, its IPv4 obscured), the old site-local (fec0::/10) and documentation
// (2001:db8::/32, 3fff::/20).
for (const [net, bits] of [['::', 96], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['100::', 64], ['64:ff9b:1::', 48], ['2001::', 32], ['2001:db8::', 32], ['3fff::', 20]] as const) blocked.addSubnet(net, bits, 'ipv6');

/**
 * An IP address a webhook may not reach. An IPv6 address that carries an IPv4 one is judged by it:
 * IPv4-mapped (::ffff:10.0.0.1, ::ffff:a00:1), NAT64 (64:ff9b::7f00:1, RFC 6052) and 6to4
 * (2002:7f00:1::, RFC 3056) — a NAT64 or 6to4 gateway would carry the request there.
 */
export function isNonPublicAddress(ip: string): boolean {
  const version = isIP(ip);
  if (version === 0) throw new TypeError(`not an IP address: ${ip}`);
  if (version === 6) {
    const embedded = embeddedIpv4(ip);
    if (embedded) return blocked.check(embedded, 'ipv4');
  }
  return blocked.check(ip, version === 6 ? 'ipv6' : 'ipv4');
}

/** The IPv4 address a NAT64 (64:ff9b::/96), IPv4-translated (::ffff:0:0:0/96) or 6to4 (2002::/16) address carries, or null. */
function embeddedIpv4(ip: string): string | null {
  const words = ipv6Words(ip);
  const v4 = (hi: number, lo: number): string => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  if (words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0)) return v4(words[6] as number, words[7] as number);
  // IPv4-translated (SIIT, ::ffff:0:a.b.c.d, RFC 2765)
  if (words.slice(0, 4).every((w) => w === 0) && words[4] === 0xffff && words[5] === 0) return v4(words[6] as number, words[7] as number);
  if (words[0] === 0x2002) return v4(words[1] as number, words[2] as number);
  return null;
}

/** An IPv6 address (valid, as isIP says) as its eight 16-bit words; a dotted IPv4 tail counts as two. */
function ipv6Words(ip: string): number[] {
  const [head = '', tail] = ip.toLowerCase().split('::') as [string, string | undefined];
  const part = (s: string): number[] =>
    s === ''
      ? []
      : s.split(':').flatMap((g) => {
          if (!g.includes('.')) return [parseInt(g, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = g.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const left = part(head);
  if (tail === undefined) return left;
  const right = part(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
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
