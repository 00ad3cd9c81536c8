import { createHmac, timingSafeEqual } from 'node:crypto';
import { notifiesAnyone, type TaskState } from '@baton/domain';
import { retryAfterMs } from '@baton/api';
import { fetch, type Dispatcher } from 'undici';
import { EgressDeniedError } from './egress.ts';

/**
 * Standard Webhooks signing: `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`,
 * with the secret given as `whsec_<base64>`.
 */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** One `v1,` signature per valid secret, space-separated (a rotation: receivers with either secret verify). */
export const signAll = (secrets: readonly string[], id: string, timestamp: number, body: string): string => secrets.map((s) => sign(s, id, timestamp, body)).join(' ');

export function verify(secret: string, headers: { id: string; timestamp: string; signature: string }, body: string, toleranceSeconds = 300, now = Date.now()): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isFinite(ts) || Math.abs(now / 1000 - ts) > toleranceSeconds) return false;
  const expected = Buffer.from(sign(secret, headers.id, ts, body));
  return headers.signature.split(' ').some((candidate) => {
    const c = Buffer.from(candidate);
    return c.length === expected.length && timingSafeEqual(c, expected);
  });
}

/** One webhook message an event makes: its type, and the subagent it is about (agent.* only). */
export interface WebhookMessage {
  type: string;
  agentId: string | null;
  /** request.opened: the request. */
  requestId?: string;
}

/**
 * Which webhook messages an event makes (docs/webhooks.md), from the task's state just before and
 * just after it (pure):
 * - `event.<EventType>` for every event;
 * - `task.<status>` when the task's status changed to it (pending or awaiting_input → running,
 *   → awaiting_input, → completed/failed/cancelled); `task.awaiting_input` also when a further
 *   request opened while the task already waited;
 * - `request.opened` for each request the event opened (a person asked: an approval, a question,
 *   a budget stop), once per request — whether or not the task's status changed with it;
 * - `agent.started` when a subagent's first attempt starts: the SubagentStarted that moves it to
 *   attempt 1. A runner records each attempt's start twice — its claim on the task stream, then
 *   on the agent's own stream (the fence) — and only the first of the two is the start; a runner
 *   retrying the agent (attempt 2, 3, …) is not a new start;
 * - `agent.awaiting_input` on a subagent's own ApprovalRequested or ClarificationRequested,
 *   `agent.completed` / `agent.failed` on SubagentCompleted / SubagentFailed;
 * - nothing for an event a fork copied from its source: a fork notifies what happens after it,
 *   and the requests still open at its fork point (reopened in the fork, `notifiesAnyone`).
 */
export function webhookMessagesFor(event: { type: string; data: unknown; metadata?: unknown }, before: TaskState, after: TaskState): WebhookMessage[] {
  if (!notifiesAnyone(event)) return [];
  const out: WebhookMessage[] = [{ type: `event.${event.type}`, agentId: null }];
  const was = before.status;
  const now = after.status;
  if (now !== 'none' && now !== 'pending') {
    const opened = Object.keys(after.pendingRequests).filter((id) => !(id in before.pendingRequests));
    if (now !== was || (now === 'awaiting_input' && opened.length > 0)) out.push({ type: `task.${now}`, agentId: null });
    for (const requestId of opened) out.push({ type: 'request.opened', agentId: null, requestId });
  }
  const data = (event.data ?? {}) as { agentId?: unknown; attempt?: unknown };
  const agentId = typeof data.agentId === 'string' && after.agents[data.agentId] ? data.agentId : null;
  if (agentId) {
    const moment =
      event.type === 'SubagentStarted' ? (data.attempt === 1 && before.agents[agentId]?.attempt !== 1 ? 'started' : null)
      : event.type === 'ApprovalRequested' || event.type === 'ClarificationRequested' ? 'awaiting_input'
      : event.type === 'SubagentCompleted' ? 'completed'
      : event.type === 'SubagentFailed' ? 'failed'
      : null;
    if (moment) out.push({ type: `agent.${moment}`, agentId });
  }
  return out;
}

/**
 * A message of `type` about `event` made again (a person's redelivery): what webhookMessagesFor
 * made of it — the subagent an agent.* message is about, the request a request.opened announces.
 */
export function webhookMessageOf(type: string, event: { data: unknown }): WebhookMessage {
  const data = (event.data ?? {}) as { agentId?: unknown; requestId?: unknown };
  return {
    type,
    agentId: type.startsWith('agent.') && typeof data.agentId === 'string' ? data.agentId : null,
    ...(type === 'request.opened' && typeof data.requestId === 'string' ? { requestId: data.requestId } : {}),
  };
}

/** Does a subscription need the task's state to know an event's messages (any task.* or agent.* type)? */
export const needsState = (subscribed: readonly string[]): boolean => subscribed.some((t) => !t.startsWith('event.'));

/** How far apart the clocks of the service that recorded an event and of Postgres may be, for `endpointServes`. */
export const CLOCK_TOLERANCE_MS = 5000;

/**
 * A tenant's endpoint serves the transitions recorded after it was made (docs/webhooks.md): an
 * older event, retried for another target or re-fed to the bus from the log, does not reach it.
 * The endpoint's time is Postgres's, the event's the clock of the service that recorded it: an
 * event recorded up to CLOCK_TOLERANCE_MS before the endpoint was made is served too (a service
 * whose clock is behind must not hide the next events from a new endpoint). Pure.
 */
export const endpointServes = (endpoint: { createdAt: Date }, event: { recordedAt: string }): boolean => Date.parse(event.recordedAt) >= endpoint.createdAt.getTime() - CLOCK_TOLERANCE_MS;

export interface DeliveryResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** 410 Gone: the receiver asks us to stop. */
  gone: boolean;
  retryAfterMs: number | null;
}

/**
 * A failed request in words an operator can act on: fetch says only "fetch failed", and why —
 * refused, a name that does not resolve, a TLS error — is in its cause (and the cause's code).
 */
export function transportError(e: Error): string {
  const cause = e.cause as (Error & { code?: string }) | undefined;
  if (!(cause instanceof Error)) return e.message;
  if (cause instanceof EgressDeniedError) return cause.message;
  const code = cause.code && !cause.message.includes(cause.code) ? ` (${cause.code})` : '';
  // Node's advice to whoever runs the process (a flag of its own) is not the receiver's problem: left out of what the tenant reads.
  return `${e.message}: ${cause.message.replace(/; if the root CA is installed locally, try running Node\.js with --use-system-ca/, '')}${code}`;
}

/**
 * POST one delivery through `agent` (egress.ts: the SSRF guard); redirects are not followed (3xx
 * is a failure), as the spec advises. Never throws: a request that fails is a failed result.
 */
export async function deliver(url: string, headers: Record<string, string>, body: string, timeoutMs: number, agent: Dispatcher): Promise<DeliveryResult> {
  const started = performance.now();
  try {
    const res = await fetch(url, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'Baton-Webhooks/1', ...headers },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    const retryAfter = retryAfterMs(res.headers.get('retry-after'), Date.now());
    return {
      ok: res.status >= 200 && res.status < 300,
      status: res.status,
      error: res.status >= 200 && res.status < 300 ? null : `HTTP ${res.status}`,
      durationMs: Math.round(performance.now() - started),
      gone: res.status === 410,
      retryAfterMs: retryAfter,
    };
  } catch (err) {
    const e = err as Error;
    return { ok: false, status: null, error: e.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : transportError(e), durationMs: Math.round(performance.now() - started), gone: false, retryAfterMs: null };
  }
}
