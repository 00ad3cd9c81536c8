import type pg from 'pg';
import { inTransaction } from './transaction.ts';

/**
 * A database restored onto another Postgres server (pg_dump → pg_restore, a managed database
 * moved, an upgrade by dump): `events.transaction_id` keeps the old server's transaction ids,
 * and the new server's counter is behind them. Readers that tail the log (the relay, SSE, the
 * task cache) take an event as committed once its transaction id is below every running
 * transaction's — so every restored event would look uncommitted until the counter caught up,
 * and an event written meanwhile, with a lower id, would fall behind the relay's checkpoint and
 * never be published. Null: the log's ids are behind this server's counter, as they must be.
 */
export async function restoredLogProblem(pool: Pick<pg.Pool, 'query'>): Promise<string | null> {
  const { rows } = await pool.query<{ last: string | null; next: string }>(
    // Ordered by the column itself (`e.`): unqualified, the name bound to the text output column and sorted the ids as strings ('998' after '12645': a restore missed).
    `select (select e.transaction_id::text from events e order by e.transaction_id desc limit 1) as last, pg_snapshot_xmax(pg_current_snapshot())::text as next`,
  );
  const r = rows[0];
  if (!r?.last || BigInt(r.last) < BigInt(r.next)) return null;
  return `the event log's transaction ids (up to ${r.last}) are ahead of this Postgres server's (next ${r.next}): the database was restored from another server; run the migrations (infra/baton up does; node packages/db/src/migrate-cli.ts, the Job baton-migrate), which renumber them, before starting the services (docs/operations.md, "Backup and restore")`;
}

export interface LogRebase {
  /** Distinct transactions renumbered. */
  transactions: number;
  /** Transaction ids used up first so that they fit below the server's counter. */
  burned: number;
}

/**
 * Renumber the transaction ids of a log restored from another server (`restoredLogProblem`) so
 * that they lie below this server's counter, in the same order and as distinct as they were
 * (4, 6, 8 … by rank: a fork still starts only between commits), and the relay's checkpoints with
 * them — each still between the same two events, so nothing is published twice or skipped. Used
 * up first, if the counter is too low to make room: two transaction ids per transaction in the
 * log. Run with no service writing (the migrations step, before they start); the log's
 * append-only trigger is lifted for this one transaction. Null: nothing to do.
 */
export async function rebaseRestoredLog(pool: pg.Pool): Promise<LogRebase | null> {
  if (!(await restoredLogProblem(pool))) return null;
  const { rows } = await pool.query<{ n: string }>('select count(distinct transaction_id)::text as n from events');
  const transactions = Number(rows[0]?.n ?? 0);
  // Room below the counter: ids up to 2 × transactions + 3, and the next new one above them all.
  let burned = 0;
  for (;;) {
    const next = BigInt((await pool.query<{ next: string }>('select pg_snapshot_xmax(pg_current_snapshot())::text as next')).rows[0]!.next);
    const short = BigInt(2 * transactions + 4) - next;
    if (short < 0n) break;
    const batch = Number(short < 100_000n ? short : 100_000n) + 1;
    // Each block a subtransaction whose write takes an id of its own (about 200,000 a second).
    await pool.query(`do $$ begin create temporary table baton_burn (x int) on commit drop; for i in 1..${batch} loop begin insert into baton_burn values (i); exception when others then null; end; end loop; end $$`);
    burned += batch;
  }
  await inTransaction(pool, async (c) => {
    await c.query('lock table events, processor_checkpoints in exclusive mode');
    await c.query('alter table events disable trigger events_no_update_delete');
    // Even numbers for the log's transactions (4, 6, 8 … by rank), so a checkpoint between two of them can take the odd one between.
    await c.query(`create temporary table baton_rebase on commit drop as
      select transaction_id as old, (2 + 2 * dense_rank() over (order by transaction_id))::text::xid8 as new from (select distinct transaction_id from events) t`);
    await c.query('update events e set transaction_id = r.new from baton_rebase r where e.transaction_id = r.old');
    // A checkpoint (tx, position) stays between the same two events: a transaction of the log takes
    // its new id; one that is not (before the first, between two, past the last) the odd id after
    // the last of the log's below it.
    await c.query(`update processor_checkpoints p set transaction_id = coalesce(
        (select r.new from baton_rebase r where r.old = p.transaction_id),
        (3 + 2 * (select count(*) from baton_rebase r where r.old < p.transaction_id))::text::xid8)`);
    await c.query('alter table events enable trigger events_no_update_delete');
  });
  return { transactions, burned };
}

/** What a rebase did, as the migrations step says it. */
export const describeRebase = (r: LogRebase): string =>
  `the event log was restored from another Postgres server: its ${r.transactions} transactions renumbered below this server's transaction ids${r.burned > 0 ? ` (${r.burned} ids used up first to make room)` : ''}`;
