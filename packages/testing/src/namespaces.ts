import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

/** The JetStream streams (their consumers go with them) of a namespace: every name ending in `_<NAMESPACE>`. */
export async function namespaceStreams(jsm: JetStreamManager, match: (suffix: string) => boolean): Promise<string[]> {
  const out: string[] = [];
  for await (const name of jsm.streams.names()) {
    const suffix = /_([A-Za-z0-9]+)$/.exec(name)?.[1];
    if (suffix && match(suffix.toLowerCase())) out.push(name);
  }
  return out;
}

/**
 * Delete everything a namespace made on the NATS server — its streams, with their consumers, and
 * any KV bucket or object store named for it (their streams end the same way) — as a test's
 * databases are dropped. Takes a connection or a URL; returns the streams deleted.
 */
export async function deleteNamespace(nats: NatsConnection | string, namespace: string): Promise<string[]> {
  const nc = typeof nats === 'string' ? await connect({ servers: nats }) : nats;
  try {
    const jsm = await jetstreamManager(nc);
    const names = await namespaceStreams(jsm, (ns) => ns === namespace.toLowerCase());
    for (const name of names) await jsm.streams.delete(name).catch(() => {});
    return names;
  } finally {
    if (typeof nats === 'string') await nc.close();
  }
}
