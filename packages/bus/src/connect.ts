import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';

/**
 * Connect to NATS, retrying with backoff while it is unreachable (logged clearly), and
 * reconnecting for ever afterwards.
 */
export async function connectNats(url: string, name: string, log: Logger, signal?: AbortSignal): Promise<NatsConnection> {
  for (let attempt = 1; ; attempt++) {
    try {
      const nc = await connect({ servers: url.split(','), name, maxReconnectAttempts: -1, reconnectTimeWait: 1000, timeout: 5000 });
      if (attempt > 1) log.info({ url }, 'connected to NATS');
      void (async () => {
        for await (const s of nc.status()) {
          if (s.type === 'disconnect' || s.type === 'reconnect') log.warn({ status: s.type }, 'NATS connection');
        }
      })().catch(() => {});
      return nc;
    } catch (err) {
      if (signal?.aborted) throw err;
      const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
      log.error({ url, attempt, retryInMs: delay, err: (err as Error).message }, `NATS is unreachable at ${url}; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
