import type pg from 'pg';

/**
 * The mail ledger (docs/email.md): one row per (task, moment, recipient), claimed before the
 * mail is sent, so that at most one notifier sends it — whatever the bus redelivers, however many
 * notifiers run. A claim is a lease: a holder that stops while sending leaves it `sending` until
 * the lease ends. Then, if it had begun to hand the message over (`markHandingOver`, recorded
 * before the first byte after DATA), the next to look marks it `unknown` (it may have gone out:
 * it is never sent again); if not, nothing went, and the next to look claims it and sends it. A
 * definite failure (the SMTP server refused, or could not be reached) is `retry`, and the next
 * delivery of the event claims it again.
 */
export interface MailKey {
  taskId: string;
  /** `request:<requestId>`, `completed`, `failed`, `cancelled`, or `email:<emailId>` (the outbox). */
  key: string;
  /** One address (notifications), or the outbox mail's recipients joined by ", ". */
  recipient: string;
}

export type MailClaim =
  /** Send it now; `attempt` counts the claims of this mail. */
  | { claimed: true; attempt: number }
  /** Sent, given up, or of unknown outcome: nothing more to do. `marked`: this call found the holder gone and marked it unknown (the attempt it was: `attempt`). */
  | { claimed: false; state: 'sent' | 'failed' | 'unknown'; marked: false; lastError: string | null }
  | { claimed: false; state: 'unknown'; marked: true; attempt: number }
  /** Another holder's lease is live: look again once it ends (`retryInMs`). */
  | { claimed: false; state: 'busy'; retryInMs: number };

export async function claimMail(pool: Pick<pg.Pool, 'query'>, k: MailKey & { messageId: string; holder: string; leaseMs: number }): Promise<MailClaim> {
  const claim = await pool.query<{ attempts: number }>(
    `insert into mail_sends as m (task_id, mail_key, recipient, message_id, state, attempts, holder, lease_until)
     values ($1, $2, $3, $4, 'sending', 1, $5, now() + make_interval(secs => $6::double precision / 1000))
     on conflict (task_id, mail_key, recipient) do update
       set state = 'sending', attempts = m.attempts + 1, holder = excluded.holder, lease_until = excluded.lease_until, handed_over_at = null, updated_at = now()
       where m.state = 'retry' or (m.state = 'sending' and m.lease_until <= now() and m.handed_over_at is null)
     returning attempts`,
    [k.taskId, k.key, k.recipient, k.messageId, k.holder, k.leaseMs],
  );
  if (claim.rows[0]) return { claimed: true, attempt: claim.rows[0].attempts };
  // Someone else's: an outcome, a live lease, or a holder that went away mid-send.
  const lost = await pool.query(
    `update mail_sends set state = 'unknown', last_error = 'the notifier sending it stopped before recording the outcome; not sent again (it may have gone out)', updated_at = now()
     where task_id = $1 and mail_key = $2 and recipient = $3 and state = 'sending' and lease_until <= now() and handed_over_at is not null
     returning attempts`,
    [k.taskId, k.key, k.recipient],
  );
  if (lost.rows[0]) return { claimed: false, state: 'unknown', marked: true, attempt: (lost.rows[0] as { attempts: number }).attempts };
  const { rows } = await pool.query<{ state: string; left_ms: number | null; last_error: string | null }>(
    `select state, greatest(0, extract(epoch from lease_until - now()) * 1000)::int as left_ms, last_error from mail_sends where task_id = $1 and mail_key = $2 and recipient = $3`,
    [k.taskId, k.key, k.recipient],
  );
  const row = rows[0];
  if (!row) throw new Error(`mail ${k.key} of task ${k.taskId} to ${k.recipient}: neither claimed nor found`);
  if (row.state === 'sending') return { claimed: false, state: 'busy', retryInMs: Math.max(100, row.left_ms ?? 0) };
  // 'retry' cannot be seen here (the insert would have claimed it) except in a race with another claim: busy.
  if (row.state === 'retry') return { claimed: false, state: 'busy', retryInMs: 100 };
  return { claimed: false, state: row.state as 'sent' | 'failed' | 'unknown', marked: false, lastError: row.last_error };
}

/** The claim was taken over (its lease ended first): this holder must not send. */
export class MailClaimLostError extends Error {
  constructor(k: MailKey) {
    super(`mail ${k.key} of task ${k.taskId} to ${k.recipient}: the claim was taken over (its lease ended); not sent by this holder`);
    this.name = new.target.name;
  }
}

/**
 * The holder is about to hand the message over (the SMTP server said go ahead after DATA): from
 * now a stop leaves the mail `unknown`, not to be sent again. Throws MailClaimLostError if the
 * claim is no longer its own (its lease ended and another took the mail): then it sends nothing.
 */
export async function markHandingOver(pool: Pick<pg.Pool, 'query'>, k: MailKey & { holder: string }): Promise<void> {
  const r = await pool.query(`update mail_sends set handed_over_at = now() where task_id = $1 and mail_key = $2 and recipient = $3 and holder = $4 and state = 'sending'`, [k.taskId, k.key, k.recipient, k.holder]);
  if ((r.rowCount ?? 0) === 0) throw new MailClaimLostError(k);
}

/**
 * The holder records what became of its claim: sent, retry (a definite failure, to try again) or
 * failed (given up). Only the holder may (a claim taken over meanwhile is not overwritten, except
 * `unknown`, which the holder's own outcome replaces: it knows).
 */
export async function settleMail(pool: Pick<pg.Pool, 'query'>, k: MailKey & { holder: string; state: 'sent' | 'retry' | 'failed' | 'unknown'; error: string | null }): Promise<boolean> {
  const r = await pool.query(
    `update mail_sends set state = $5, last_error = $6, lease_until = null, updated_at = now()
     where task_id = $1 and mail_key = $2 and recipient = $3 and holder = $4 and state in ('sending', 'unknown')`,
    [k.taskId, k.key, k.recipient, k.holder, k.state, k.error],
  );
  return (r.rowCount ?? 0) > 0;
}

/**
 * Settle the claims of a mail that will not be sent any more (its request closed) left by a
 * notifier that stopped (lease over): one handed over to the SMTP server becomes `unknown` (it may
 * have gone out), one that was not `failed` (it never went); one waiting to be tried again
 * (`retry`: its last attempt failed) `failed` too (`why`: retry). Returns what was settled, and how
 * long until the last claim still running ends (null: none) — its holder may be alive and finish,
 * or dead: look again then.
 */
export async function settleAbandonedMail(
  pool: Pick<pg.Pool, 'query'>,
  k: { taskId: string; key: string; error: { unknown: string; failed: string; retry: string } },
): Promise<{ settled: { recipient: string; state: 'unknown' | 'failed'; why: 'unknown' | 'failed' | 'retry'; attempts: number }[]; runningForMs: number | null }> {
  // A mail waiting to be tried again (its last attempt failed: a 4xx) is settled too: nothing tries it once the request is closed.
  const { rows } = await pool.query<{ recipient: string; state: 'unknown' | 'failed'; why: 'unknown' | 'failed' | 'retry'; attempts: number }>(
    `with old as (select recipient, state as was, handed_over_at from mail_sends
                   where task_id = $1 and mail_key = $2 and ((state = 'sending' and lease_until <= now()) or state = 'retry') for update)
     update mail_sends m set state = case when old.was = 'sending' and old.handed_over_at is not null then 'unknown' else 'failed' end,
            last_error = case when old.was = 'retry' then $5 || coalesce(' (its last attempt: ' || m.last_error || ')', '')
                              when old.handed_over_at is null then $3 else $4 end,
            lease_until = null, updated_at = now()
       from old where m.task_id = $1 and m.mail_key = $2 and m.recipient = old.recipient
      returning m.recipient, m.state, case when old.was = 'retry' then 'retry' else m.state end as why, m.attempts`,
    [k.taskId, k.key, k.error.failed, k.error.unknown, k.error.retry],
  );
  const running = await pool.query<{ left_ms: number | null }>(
    `select max(greatest(0, extract(epoch from lease_until - now()) * 1000))::int as left_ms from mail_sends where task_id = $1 and mail_key = $2 and state = 'sending'`,
    [k.taskId, k.key],
  );
  return { settled: rows, runningForMs: running.rows[0]?.left_ms ?? null };
}

/**
 * Give a mail up without sending it (its event came back past its attempts unsettled): never
 * claimed, or claimed by a notifier that stopped (lease over), or waiting to be tried again —
 * `unknown` if it was being handed over, else `failed`. Null: nothing to settle (a live claim
 * holds it, or it is settled already).
 */
export async function giveUpMail(pool: Pick<pg.Pool, 'query'>, k: MailKey & { messageId: string; error: { failed: string; unknown: string } }): Promise<{ state: 'failed' | 'unknown'; attempts: number } | null> {
  const { rows } = await pool.query<{ state: 'failed' | 'unknown'; attempts: number }>(
    `insert into mail_sends as m (task_id, mail_key, recipient, message_id, state, attempts, last_error)
     values ($1, $2, $3, $4, 'failed', 0, $5)
     on conflict (task_id, mail_key, recipient) do update
       set state = case when m.state = 'sending' and m.handed_over_at is not null then 'unknown' else 'failed' end,
           last_error = case when m.state = 'sending' and m.handed_over_at is not null then $6 else $5 end,
           lease_until = null, updated_at = now()
       where m.state = 'retry' or (m.state = 'sending' and m.lease_until <= now())
     returning state, attempts`,
    [k.taskId, k.key, k.recipient, k.messageId, k.error.failed, k.error.unknown],
  );
  return rows[0] ?? null;
}

/** Where each mail of a task stands (for tests and operators). */
export async function mailSends(pool: Pick<pg.Pool, 'query'>, taskId: string): Promise<{ key: string; recipient: string; state: string; attempts: number; lastError: string | null }[]> {
  const { rows } = await pool.query(`select mail_key, recipient, state, attempts, last_error from mail_sends where task_id = $1 order by mail_key, recipient`, [taskId]);
  return rows.map((r) => ({ key: r.mail_key, recipient: r.recipient, state: r.state, attempts: r.attempts, lastError: r.last_error }));
}

/** Where one mail stands in the ledger (null: never claimed). */
export async function mailSendState(pool: Pick<pg.Pool, 'query'>, k: MailKey): Promise<{ state: 'sending' | 'retry' | 'sent' | 'failed' | 'unknown'; attempts: number; lastError: string | null } | null> {
  const { rows } = await pool.query('select state, attempts, last_error from mail_sends where task_id = $1 and mail_key = $2 and recipient = $3', [k.taskId, k.key, k.recipient]);
  const r = rows[0];
  return r ? { state: r.state, attempts: r.attempts, lastError: r.last_error } : null;
}

/** Still being tried by the notifiers (a claim is live or will be retried): a person's resend would make two. */
export const mailInFlight = (s: { state: string } | null): boolean => s?.state === 'sending' || s?.state === 'retry';

/**
 * What a person's resend of a finished mail came to (docs/email.md, "Sending a mail again"): sent,
 * the ledger says so; not sent, it keeps its state (failed, unknown, or sent before) with the
 * newest error. Only a mail the notifiers are done with (`mailInFlight` false) is resent.
 */
export async function recordMailResend(pool: Pick<pg.Pool, 'query'>, k: MailKey & { messageId: string; ok: boolean; error: string | null }): Promise<void> {
  await pool.query(
    `insert into mail_sends as m (task_id, mail_key, recipient, message_id, state, attempts, last_error)
     values ($1, $2, $3, $4, case when $5 then 'sent' else 'failed' end, 1, $6)
     on conflict (task_id, mail_key, recipient) do update
       set state = case when $5 then 'sent' else m.state end, attempts = m.attempts + 1, last_error = $6, updated_at = now()
       where m.state not in ('sending', 'retry')`,
    [k.taskId, k.key, k.recipient, k.messageId, k.ok, k.error],
  );
}
