import type { Logger } from 'pino';

/** Socket-level failures: the peer is gone, refused, unreachable or timed out. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'EAI_AGAIN', 'ENOTCONN']);
/** Postgres: admin_shutdown, crash_shutdown, cannot_connect_now (class 08, connection exception, is matched by prefix). */
const PG_CODES = new Set(['57P01', '57P02', '57P03']);
/** pg's own messages for a connection that ended or never came. */
const PG_MESSAGES = /Connection terminated|not queryable|timeout exceeded when trying to connect|Connection ended unexpectedly/i;
/** nats.js errors for a connection that closed, is draining or dropped. */
const NATS_ERRORS = new Set(['ConnectionError', 'ClosedConnectionError', 'DrainingConnectionError']);

/**
 * Whether an error only says that a connection to Postgres or NATS was lost (or could not be
 * made) — something the services recover from by reconnecting — rather than a bug. Looks
 * through `cause` chains and AggregateErrors.
 */
export function isConnectionError(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (NETWORK_CODES.has(code) || PG_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
  if (typeof e.name === 'string' && NATS_ERRORS.has(e.name)) return true;
  if (typeof e.message === 'string' && PG_MESSAGES.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isConnectionError(x, depth + 1))) return true;
  return isConnectionError(e.cause, depth + 1);
}

let installed = false;

/**
 * Process-level policy for promise rejections nobody handled: one that only reports a lost
 * connection (isConnectionError) is logged and the process goes on — the connection is
 * re-established on next use, and a process that died of it would take its in-flight work down
 * for nothing. Anything else is a bug: logged as fatal, and the process exits 1 (as Node would),
 * to be restarted by its supervisor (`baton up`, compose's restart policy). Idempotent.
 */
export function installCrashGuards(log: Logger): void {
  if (installed) return;
  installed = true;
  process.on('unhandledRejection', (reason) => {
    if (isConnectionError(reason)) {
      log.error({ err: reason }, 'unhandled rejection from a lost connection; carrying on (it reconnects)');
      return;
    }
    log.fatal({ err: reason }, 'unhandled rejection; exiting');
    process.exit(1);
  });
}
