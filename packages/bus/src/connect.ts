import { startupStep, startupStepFailed, within } from '@baton/runtime';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { sendSoon } from './coalesce.ts';
import { flushLiveTicks } from './messages.ts';

export interface ConnectNatsOptions {
  /** Give up connecting (the first time) when aborted. */
  signal?: AbortSignal;
  /** Pause between reconnect attempts (default 1 s). */
  reconnectTimeWaitMs?: number;
  /**
   * The connection closed for good without anyone draining or closing it. With unlimited
   * reconnect attempts that only happens when the server refuses it (an authorization or
   * protocol error, twice in a row). Default: log it as fatal and exit 1 — a service holds this
   * connection in all its workers, so its supervisor (`baton up`, compose) starts it afresh.
   */
  onClosed?: (err: Error) => void;
}

/**
 * Connect to NATS, retrying with backoff while it is unreachable (logged clearly), and
 * reconnecting for ever afterwards (`maxReconnectAttempts: -1`; the client's default gives up
 * after 10 attempts): a NATS restart or outage of any length is a pause, logged as it starts and
 * ends. A connection closed for good is handed to `onClosed`.
 */
export async function connectNats(url: string, name: string, log: Logger, opts: ConnectNatsOptions = {}): Promise<NatsConnection> {
  startupStep('connecting to NATS (NATS_URL)');
  for (let attempt = 1; ; attempt++) {
    try {
      const nc = await connect({ servers: url.split(','), name, maxReconnectAttempts: -1, reconnectTimeWait: opts.reconnectTimeWaitMs ?? 1000, timeout: 5000 });
      if (attempt > 1) log.info({ url }, 'connected to NATS');
      void (async () => {
        let since = 0;
        for await (const s of nc.status()) {
          if (s.type === 'disconnect') {
            since = Date.now();
            log.warn({ url }, 'NATS connection lost; reconnecting (for as long as it takes)');
          } else if (s.type === 'reconnect') {
            log.warn({ url, afterMs: since ? Date.now() - since : undefined }, 'NATS connection re-established');
          }
        }
      })().catch(() => {});
      void nc.closed().then((err) => {
        if (!err) return; // drained or closed on purpose
        if (opts.onClosed) return opts.onClosed(err);
        log.fatal({ url, err }, 'NATS connection closed for good; exiting so that the supervisor restarts this process');
        process.exit(1);
      });
      return nc;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      startupStepFailed(err);
      const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
      log.error({ url, attempt, retryInMs: delay, err: (err as Error).message }, `NATS is unreachable at ${url}; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/**
 * Whether NATS answers on this connection now: a ping's round trip within `timeoutMs`. A
 * connection that is reconnecting is not closed (`isClosed()` stays false for as long as it
 * retries), so readiness asks the server instead. Rejects naming why.
 */
export async function natsAnswers(nc: Pick<NatsConnection, 'isClosed' | 'rtt'>, timeoutMs = 1000): Promise<void> {
  if (nc.isClosed()) throw new Error('connection closed');
  await within(timeoutMs, () => nc.rtt(), `no answer to a ping within ${timeoutMs} ms (disconnected, reconnecting?)`);
}

/**
 * Drain a service's connection on shutdown, after sending the live ticks still due and what
 * `sendSoon` still holds (acks, fast-path wake-ups): once a drain has begun, nothing more can be
 * published.
 */
export function drainNats(nc: Pick<NatsConnection, 'drain'>): Promise<void> {
  flushLiveTicks();
  sendSoon.flush();
  return nc.drain();
}
