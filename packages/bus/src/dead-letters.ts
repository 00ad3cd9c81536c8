import type pg from 'pg';
import type { DeadLetter } from './consumer.ts';

/** Record a dead letter in Postgres (idempotent per consumer and stream sequence). */
export function deadLetterRecorder(pool: pg.Pool): (d: DeadLetter) => Promise<void> {
  return async (d) => {
    await pool.query(
      `insert into dead_letters (consumer, subject, stream_sequence, deliveries, payload, error)
       values ($1, $2, $3, $4, $5, $6) on conflict (consumer, stream_sequence) do nothing`,
      [d.consumer, d.subject, d.streamSequence, d.deliveries, d.payload, d.error],
    );
  };
}
