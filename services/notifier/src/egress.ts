import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { isNonPublicAddress } from '@baton/api';
import { Agent, buildConnector } from 'undici';

/**
 * SSRF guard for webhook deliveries, with @baton/api's one address classification (the gateway
 * refuses literal non-public addresses at registration). It lives in the connection itself: the
 * address a name resolved to is checked and then connected to, in one step. A check before the
 * request and a second resolution by the request (what this did before) let a name whose DNS
 * answers differently the second time — DNS rebinding, a TTL of 0 — pass the check with a public
 * address and then reach a private one.
 */
export class EgressDeniedError extends Error {
  readonly code = 'EGRESS_DENIED';
  constructor(host: string, address: string) {
    super(`${host === address ? `webhook address ${address} is` : `webhook host ${host} resolves to ${address},`} a non-public address (set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it)`);
    this.name = new.target.name;
  }
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address a name resolves to (the system's resolver, as a connection would use it). */
export type Resolve = (host: string) => Promise<ResolvedAddress[]>;

const systemResolve: Resolve = (host) => lookup(host, { all: true });

/**
 * A socket lookup that refuses a name if any of its addresses is non-public, and otherwise hands
 * the connection exactly the addresses it checked (honouring the family and `all` it is asked for).
 */
export function publicOnlyLookup(resolve: Resolve = systemResolve): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (all) => {
        const refused = all.find((a) => isNonPublicAddress(a.address));
        if (refused) return callback(new EgressDeniedError(hostname, refused.address), '', 0);
        const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
        const first = wanted[0];
        if (!first) return callback(Object.assign(new Error(`${hostname} has no IPv${String(options.family)} address`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) callback(null, wanted);
        else callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}

/**
 * The connections webhook deliveries go through. With private networks refused (the default), a
 * literal address is judged before connecting and a name by `publicOnlyLookup`; allowed
 * (development), a plain agent. One per notifier: it keeps connections to receivers alive.
 */
export function webhookAgent(o: { allowPrivateNetworks: boolean; resolve?: Resolve }): Agent {
  if (o.allowPrivateNetworks) return new Agent();
  const connect = buildConnector({ lookup: publicOnlyLookup(o.resolve) });
  return new Agent({
    connect: (options, callback) => {
      // A literal address skips the lookup (node connects to it directly): judged here.
      const host = options.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host) !== 0 && isNonPublicAddress(host)) return callback(new EgressDeniedError(host, host), null);
      connect(options, callback);
    },
  });
}
