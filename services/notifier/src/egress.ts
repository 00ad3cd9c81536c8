import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isNonPublicAddress, redactCredentials, urlHost } from '@baton/api';

/**
 * SSRF guard for webhook deliveries, with @baton/api's one address classification (the gateway
 * refuses literal non-public addresses at registration): checked at delivery time, on every
 * address the name resolves to, unless the deployment allows private networks (development).
 */
export class EgressDeniedError extends Error {
  constructor(url: string, address: string) {
    super(`webhook URL ${redactCredentials(url)} resolves to ${address}, a non-public address (set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it)`);
    this.name = new.target.name;
  }
}

export async function assertPublicUrl(url: string, resolve: (host: string) => Promise<string[]> = defaultResolve): Promise<void> {
  const host = urlHost(new URL(url));
  const addresses = isIP(host) ? [host] : await resolve(host);
  for (const a of addresses) if (isNonPublicAddress(a)) throw new EgressDeniedError(url, a);
}

async function defaultResolve(host: string): Promise<string[]> {
  return (await lookup(host, { all: true })).map((r) => r.address);
}
