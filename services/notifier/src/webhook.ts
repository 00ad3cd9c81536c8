import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks signing: `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`,
 * with the secret given as `whsec_<base64>`.
 */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export function verify(secret: string, headers: { id: string; timestamp: string; signature: string }, body: string, toleranceSeconds = 300, now = Date.now()): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isFinite(ts) || Math.abs(now / 1000 - ts) > toleranceSeconds) return false;
  const expected = Buffer.from(sign(secret, headers.id, ts, body));
  return headers.signature.split(' ').some((candidate) => {
    const c = Buffer.from(candidate);
    return c.length === expected.length && timingSafeEqual(c, expected);
  });
}

/** Which webhook types an event produces (API.md): the task.* types plus `event.<EventType>` on request. */
export function webhookTypesFor(eventType: string): string[] {
  const types = [`event.${eventType}`];
  switch (eventType) {
    case 'TaskCompleted':
      types.push('task.completed');
      break;
    case 'TaskFailed':
      types.push('task.failed');
      break;
    case 'TaskCancelled':
      types.push('task.cancelled');
      break;
    case 'ApprovalRequested':
    case 'ClarificationRequested':
    case 'BudgetExceeded':
      types.push('task.awaiting_input');
      break;
  }
  return types;
}

export interface DeliveryResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** 410 Gone: the receiver asks us to stop. */
  gone: boolean;
  retryAfterMs: number | null;
}

/** POST one delivery; redirects are not followed (3xx is a failure), as the spec advises. */
export async function deliver(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<DeliveryResult> {
  const started = performance.now();
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'Baton-Webhooks/1', ...headers },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    const retryAfter = Number(res.headers.get('retry-after'));
    return {
      ok: res.status >= 200 && res.status < 300,
      status: res.status,
      error: res.status >= 200 && res.status < 300 ? null : `HTTP ${res.status}`,
      durationMs: Math.round(performance.now() - started),
      gone: res.status === 410,
      retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : null,
    };
  } catch (err) {
    const e = err as Error;
    return { ok: false, status: null, error: e.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : e.message, durationMs: Math.round(performance.now() - started), gone: false, retryAfterMs: null };
  }
}
