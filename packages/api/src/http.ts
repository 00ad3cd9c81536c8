/**
 * How long a server asked to wait (`Retry-After`, RFC 9110), in ms: seconds, or an HTTP date (a
 * date in the past, 0, absent or anything else: null, no wish). Read by the notifier (a webhook
 * receiver's 429 or 503) and the client (the gateway's 429 on a stream). Pure.
 */
export function retryAfterMs(header: string | null | undefined, now: number): number | null {
  const v = header?.trim() ?? '';
  if (/^\d+$/.test(v)) return Number(v) > 0 ? Number(v) * 1000 : null;
  const at = Date.parse(v);
  return Number.isFinite(at) && at > now ? at - now : null;
}

/** The header of an SSE answer saying how often the stream has a heartbeat (ms): a client that hears nothing for three takes the connection for dead. */
export const HEARTBEAT_HEADER = 'baton-heartbeat-ms';
