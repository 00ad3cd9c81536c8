import { useCallback, useEffect, useState } from 'react';
import { ApiError, api, type DeliveryView } from './api.ts';
import { announce, busyProps } from './a11y.tsx';
import { ErrorLine } from './ErrorLine.tsx';

/** How long, at most, the card looks for the attempt a "Send again" asked for (a notifier sends it within a second or two). */
const REDELIVERY_WAIT_MS = 30_000;

/**
 * Every attempt to deliver the task's webhooks and mail (`GET /v1/tasks/:id/deliveries`), newest
 * first: when, what, where, how it went. A webhook message or a notification mail can be sent again
 * ("Send again": a new attempt, recorded here once a notifier has sent it; a mail that cannot be —
 * its request decided, still being tried — is refused with the reason); an agent's own mail
 * (`email.outbox`) cannot. Read when the task moves, on Refresh, and while a redelivery is on its
 * way. Shown only once there is an attempt.
 */
export function Deliveries({ taskId, version }: { taskId: string; version: number }) {
  const [items, setItems] = useState<DeliveryView[]>([]);
  const [error, setError] = useState<string | null>(null);
  /** A redelivery asked for: of which delivery, and the newest attempt recorded when it was asked for. */
  const [queued, setQueued] = useState<{ deliveryId: string; after: number } | null>(null);
  const load = useCallback(async (): Promise<DeliveryView[]> => {
    try {
      const r = await api<{ items: DeliveryView[] }>('GET', `/v1/tasks/${taskId}/deliveries`);
      setItems(r.items);
      setError(null);
      return r.items;
    } catch (err) {
      setError((err as Error).message);
      return [];
    }
  }, [taskId]);
  useEffect(() => void load(), [load, version]);
  // A redelivery asked for: look every second until its attempt is recorded (or give up saying so).
  useEffect(() => {
    if (!queued) return;
    const since = Date.now();
    const t = setInterval(() => {
      void load().then((now) => {
        if (now.some((d) => d.redelivery && Number(d.id) > queued.after)) setQueued(null);
        else if (Date.now() - since > REDELIVERY_WAIT_MS) {
          setQueued(null);
          setError('The redelivery was queued but no attempt is recorded yet: is a notifier running? Refresh to look again.');
        }
      });
    }, 1000);
    return () => clearInterval(t);
  }, [queued, load]);
  const sendAgain = async (d: DeliveryView): Promise<void> => {
    if (queued !== null) return; // one at a time: the card looks for its attempt
    try {
      await api('POST', `/v1/tasks/${taskId}/deliveries/${d.id}/redeliver`);
      setError(null);
      setQueued({ deliveryId: d.id, after: Math.max(0, ...items.map((x) => Number(x.id))) });
      announce(`Queued: delivery ${d.id} is sent again.`);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : (err as Error).message);
    }
  };
  if (items.length === 0 && !error) return null;
  return (
    <section className="deliveries" aria-label="deliveries">
      <div className="row section-head">
        <h3>Deliveries</h3>
        <button className="small" onClick={() => void load()}>
          Refresh
        </button>
      </div>
      <ErrorLine error={error} />
      <ul>
        {[...items].reverse().map((d) => (
          <li key={d.id} data-delivery={d.id}>
            <span className={`status s-${d.ok ? 'completed' : 'failed'}`}>{d.ok ? `ok ${d.statusCode ?? ''}`.trim() : `failed${d.statusCode !== null ? ` ${d.statusCode}` : ''}`}</span>{' '}
            <b>{d.type}</b> {d.channel === 'email' ? 'mail to' : 'to'} {d.url}
            <span className="meta">
              {' '}
              · attempt {d.attempt}
              {d.redelivery ? ' (sent again)' : ''} · {new Date(d.attemptedAt).toLocaleTimeString()} · {d.durationMs} ms
              {d.error ? ` · ${d.error}` : ''}
              {d.givenUp ? ' · given up: no more attempts' : ''}
            </span>{' '}
            {d.type !== 'email.outbox' && (
              <button className="small" {...busyProps(queued !== null)} onClick={() => void sendAgain(d)} aria-label={queued?.deliveryId === d.id ? `Queued…, delivery ${d.id}` : `Send again, delivery ${d.id}`}>
                {queued?.deliveryId === d.id ? 'Queued…' : 'Send again'}
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
