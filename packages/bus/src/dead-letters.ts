import type pg from 'pg';
import type { DeadLetter } from './consumer.ts';

/**
 * Record a dead letter in Postgres, once per message (consumer, stream sequence and the time the
 * stream stored it, to the microsecond: a stream made again reuses sequences).
 */
export function deadLetterRecorder(pool: pg.Pool): (d: DeadLetter) => Promise<void> {
  return async (d) => {
    await pool.query(
      `insert into dead_letters (consumer, subject, stream_sequence, stored_at, deliveries, payload, error)
       values ($1, $2, $3, 'epoch'::timestamptz + $4::bigint * interval '1 microsecond', $5, $6, $7)
       on conflict (consumer, stream_sequence, stored_at) do nothing`,
      [d.consumer, d.subject, d.streamSequence, String(d.storedAtNanos / 1000n), d.deliveries, d.payload, d.error],
    );
  };
}

/** Every consumer's dead letters: how many, and when the last was recorded (the gateway's gauges, read at scrape). */
export async function deadLetterCounts(pool: Pick<pg.Pool, 'query'>): Promise<{ consumer: string; count: number; lastRecordedAt: Date }[]> {
  const { rows } = await pool.query<{ consumer: string; n: number; last: Date }>('select consumer, count(*)::int as n, max(recorded_at) as last from dead_letters group by consumer order by consumer');
  return rows.map((r) => ({ consumer: r.consumer, count: r.n, lastRecordedAt: r.last }));
}

/** How many dead letters `consumer` has recorded for one piece of work: its exact subject (an agent's jobs), or every subject under a prefix (a task's lead triggers). */
export async function countDeadLetters(pool: Pick<pg.Pool, 'query'>, consumer: string, work: { subject: string } | { prefix: string }): Promise<number> {
  const res = 'subject' in work
    ? await pool.query<{ n: number }>('select count(*)::int as n from dead_letters where consumer = $1 and subject = $2', [consumer, work.subject])
    : await pool.query<{ n: number }>('select count(*)::int as n from dead_letters where consumer = $1 and starts_with(subject, $2)', [consumer, work.prefix]);
  return res.rows[0]?.n ?? 0;
}

/** The unsettled dead letter of one piece of work that gives it up: the ones before it are left to the watchdog. */
export const UNSETTLED_DEAD_LETTERS_TO_GIVE_UP = 3;

/**
 * Whether a dead letter gives its work up for good (its agent or task then fails visibly). One
 * whose handler failed does. One that was only never settled — its last delivery's process died,
 * handed it back or ran out of time, as when processes restarted during an outage forget which
 * deliveries failed on a lost connection — leaves the work to the watchdog, which wakes or
 * re-dispatches it — until the UNSETTLED_DEAD_LETTERS_TO_GIVE_UP-th of the same work (`recorded`,
 * this one included), so work that keeps killing its processes is still given up.
 */
export const deadLetterGivesUp = (dl: Pick<DeadLetter, 'unsettled'>, recorded: number): boolean => !dl.unsettled || recorded >= UNSETTLED_DEAD_LETTERS_TO_GIVE_UP;
