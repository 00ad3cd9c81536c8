import { comesBefore, NOTIFY_CHANNEL, type EventStore, type LogCursor, type TailedEvent } from '@baton/event-store';
import type { NatsConnection } from '@nats-io/nats-core';
import type pg from 'pg';
import type { Logger } from 'pino';
import { STEP_EVENT_TYPES, TERMINAL_EVENT_TYPES } from '@baton/domain';
import { messagesFor, type RelayLink } from './messages.ts';
import { BatchPublisher } from './publisher.ts';
import { setBounded } from '@baton/runtime';
import { exportMetric, metrics, onScrape } from '@baton/telemetry';
import type { BusNames } from './subjects.ts';
import type { NotifierAudience } from './audience.ts';

export interface RelayOptions {
  pool: pg.Pool;
  store: EventStore;
  nc: NatsConnection;
  names: BusNames;
  log: Logger;
  processorId?: string;
  batchSize?: number;
  /** Safety poll while idle; NOTIFY does the real waking. */
  backstopMs?: number;
  /**
   * Save the checkpoint at most this often while busy (and always when idle or stopping). A
   * crash re-publishes at most this much, which JetStream's dedupe window drops.
   */
  checkpointEveryMs?: number;
  /** Test hook, called after each PubAck; throwing simulates a crash mid-batch. */
  afterPublish?: (published: number) => void;
  /** A stream answered a publish with a store failure (wire it to a TopologyWatch's `storeFailed`). */
  onStoreFailure?: (stream: string, err: Error) => void;
  /**
   * Whom the notifier serves (`NotifierAudience`): a transition it does not is sent as a
   * core-NATS signal, not stored in `BATON_EVENTS`. Absent: every transition goes to the stream.
   */
  audience?: Pick<NotifierAudience, 'refresh' | 'serves' | 'invalidate' | 'channel'>;
}

/**
 * The relay is the only path from the log to NATS. It tails the log by (transaction_id,
 * global_position) — never skipping a late commit — publishes each transition with
 * `msgID = eventId` (JetStream drops duplicates) plus any trigger and runner jobs it implies (a
 * transition the notifier does not serve goes out as a core-NATS signal instead, see `audience`),
 * and advances its checkpoint only past batches whose every PubAck came back (saved at most every 250 ms
 * while busy, and once things have been quiet for as long). Replicas compete for a Postgres
 * advisory lock held by a dedicated session: standbys block inside Postgres (no polling) and
 * take over the moment the leader's session ends.
 */
export class Relay {
  private readonly o: Required<Omit<RelayOptions, 'afterPublish' | 'onStoreFailure' | 'audience'>> & Pick<RelayOptions, 'afterPublish' | 'onStoreFailure' | 'audience'>;
  private running = false;
  private client: pg.PoolClient | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private publisher: BatchPublisher | null = null;
  /** Resolved by stop(): ends a pause between publish attempts. */
  private stopping: Promise<void> = Promise.resolve();
  private stopped: (() => void) | null = null;
  leader = false;
  published = 0;
  /** Set by `rewind`: the leader moves its cursor back here before its next read. */
  private rewindTo: LogCursor | null = null;
  /** Per task, the last event this relay published, from a tail followed without a break since it began to lead (or rewound). */
  private readonly lastRelayed = new Map<string, LogCursor>();
  crashed: Error | null = null;

  constructor(o: RelayOptions) {
    this.o = { processorId: 'relay', batchSize: 500, backstopMs: 30_000, checkpointEveryMs: 250, ...o };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // This process runs a relay: it says whether it leads and what it published (the others do not show these at all).
    exportMetric(metrics.relayLeader);
    exportMetric(metrics.relayPublished);
    this.stopping = new Promise((r) => (this.stopped = r));
    const onStoreFailure = this.o.onStoreFailure;
    this.publisher = new BatchPublisher(this.o.nc, onStoreFailure ? { onStoreFailure } : {});
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.stopped?.();
    // A standby blocked in pg_advisory_lock is released by ending its session.
    if (this.client && !this.leader) this.destroyClient(new Error('relay stopping'));
    await this.loop;
    this.publisher?.close();
    this.publisher = null;
  }

  /**
   * Publish again from `cursor` (the bus lost what it held). Only the leader's cursor moves;
   * a standby's is read from the checkpoint when it takes over. Messages keep their ids, so
   * what the bus still has is dropped as a duplicate within the dedupe window.
   */
  rewind(cursor: LogCursor): void {
    this.rewindTo = cursor;
    this.wake?.();
  }

  private destroyClient(err?: Error): void {
    const c = this.client;
    this.client = null;
    this.leader = false;
    metrics.relayLeader.set(0);
    if (c) {
      try {
        c.release(err ?? true);
      } catch {
        /* already released */
      }
    }
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        await this.lead();
        failures = 0;
      } catch (err) {
        if (this.crashed) {
          this.running = false;
          this.destroyClient(this.crashed);
          return;
        }
        if (!this.running) break;
        failures++;
        this.o.log.warn({ err, failures }, 'relay interrupted; retrying');
        this.destroyClient(err instanceof Error ? err : new Error(String(err)));
        await sleep(Math.min(5000, 100 * 2 ** failures));
      }
    }
    this.destroyClient();
  }

  private async lead(): Promise<void> {
    const client = await this.o.pool.connect();
    this.client = client;
    // A lost session wakes the loop at once: its next statement fails and the relay reconnects
    // (an idle relay would otherwise notice only at its backstop).
    client.on('error', () => this.wake?.());
    // Lock key: per database, so one relay leads per Baton deployment.
    await client.query(`select pg_advisory_lock(hashtext('baton-relay:' || $1))`, [this.o.processorId]);
    if (!this.running) return;
    this.leader = true;
    metrics.relayLeader.set(1);
    this.o.log.info('relay: leading');
    const audience = this.o.audience;
    client.on('notification', (n) => {
      if (n.channel === NOTIFY_CHANNEL) this.wake?.();
      // Postgres sends it as soon as this session is between statements, so in practice the next
      // tail's transitions (committed after the change) are decided with the list read anew.
      else if (audience && n.channel === audience.channel) audience.invalidate();
    });
    await client.query(`listen ${NOTIFY_CHANNEL}`);
    if (audience?.channel) await client.query(`listen ${audience.channel}`);
    audience?.invalidate(); // what changed while this session did not listen
    this.lastRelayed.clear(); // vouched for only from this tail on
    let cursor = await this.o.store.loadCheckpoint(this.o.processorId, client);
    let saved = cursor;
    let savedAt = Date.now();
    const save = async (): Promise<void> => {
      if (saved === cursor) return;
      await this.o.store.saveCheckpoint(this.o.processorId, cursor, client);
      saved = cursor;
      savedAt = Date.now();
    };
    let hiddenDelay = 2;
    let publishFailures = 0;
    while (this.running) {
      const wakeup = this.nextWake();
      if (this.rewindTo) {
        if (comesBefore(this.rewindTo, cursor)) {
          this.o.log.warn({ from: `${cursor.txid}:${cursor.position}`, to: `${this.rewindTo.txid}:${this.rewindTo.position}` }, 'relay: re-publishing from the log');
          cursor = this.rewindTo;
          this.lastRelayed.clear();
          await this.o.store.saveCheckpoint(this.o.processorId, cursor, client);
          saved = cursor;
        }
        this.rewindTo = null;
      }
      const { events: batch, hidden } = await this.o.store.tail(cursor, this.o.batchSize, client, STEP_EVENT_TYPES); // steps are not relayed
      if (batch.length > 0) {
        try {
          cursor = await this.publishBatch(batch);
          publishFailures = 0;
        } catch (err) {
          if (this.crashed) throw err;
          // NATS did not take the whole batch (it is away, a stream is missing or broken): keep
          // the lock and the session — the watchdog works where the relay leads, and it is what
          // heals the bus — and send the same batch again after a pause.
          publishFailures++;
          this.o.log.warn({ err, failures: publishFailures }, 'relay: publish failed; retrying');
          await untilWokenOr(this.stopping, Math.min(5000, 100 * 2 ** publishFailures));
          continue;
        }
        if (Date.now() - savedAt >= this.o.checkpointEveryMs) await save();
        if (batch.length === this.o.batchSize) continue; // more may be waiting
      }
      // Rows that an older open transaction still hides: look again soon. Caught up with an
      // unsaved cursor: save it once no wake-up came for checkpointEveryMs (one statement per
      // quiet moment, not per event). Else wait for NOTIFY.
      const unsaved = saved !== cursor;
      const wait = hidden ? hiddenDelay : unsaved ? Math.max(0, this.o.checkpointEveryMs - (Date.now() - savedAt)) : this.o.backstopMs;
      const woken = await untilWokenOr(wakeup, wait);
      if (!woken && !hidden && unsaved) await save();
      hiddenDelay = hidden ? Math.min(hiddenDelay * 2, 250) : 2;
    }
    await save();
    await client.query(`unlisten *`).catch(() => {});
    await client.query(`select pg_advisory_unlock(hashtext('baton-relay:' || $1))`, [this.o.processorId]).catch(() => {});
  }

  private nextWake(): Promise<void> {
    return new Promise((r) => {
      this.wake = r;
    });
  }

  /** Publish a batch; returns the cursor after it once every PubAck is in. */
  private async publishBatch(batch: TailedEvent[]): Promise<LogCursor> {
    const audience = this.o.audience;
    // On the relay's own session (no wait for a pool slot in the publish path).
    if (audience && this.client) await audience.refresh(this.client);
    const { links, last } = linkBatch(this.lastRelayed, batch);
    const messages = batch.flatMap(({ event }, i) => messagesFor(event, this.o.names, audience ? audience.serves(event) : true, links[i]));
    await (this.publisher as BatchPublisher).publishAll(messages, { onAck: () => this.countPublished() });
    // Only once all of it is out: a batch sent again after a failure links as it did the first time.
    for (const [taskId, c] of last) {
      if (c) setBounded(this.lastRelayed, taskId, c, MAX_LINKED_TASKS);
      else this.lastRelayed.delete(taskId);
    }
    return (batch[batch.length - 1] as { cursor: LogCursor }).cursor;
  }

  private countPublished(): void {
    this.published++;
    metrics.relayPublished.inc();
    if (this.o.afterPublish) {
      try {
        this.o.afterPublish(this.published);
      } catch (err) {
        this.crashed = err instanceof Error ? err : new Error(String(err));
        throw this.crashed;
      }
    }
  }
}


/**
 * The relay as seen from outside (what /readyz reports): is one leading anywhere (its advisory
 * lock is held in this database), and how far behind the log head its checkpoint is.
 */
export async function relayStatus(pool: Pick<pg.Pool, 'query'>, processorId = 'relay'): Promise<{ leading: boolean; unpublished: number; oldestUnpublishedS: number | null }> {
  const lock = await pool.query<{ leading: boolean }>(
    `select exists (
       select 1 from pg_locks where locktype = 'advisory' and granted and objsubid = 1
         and database = (select oid from pg_database where datname = current_database())
         and ((classid::bigint << 32) | objid::bigint) = hashtext('baton-relay:' || $1)::bigint
     ) as leading`,
    [processorId],
  );
  // Behind the checkpoint (saved at most every 250 ms while busy): transitions, not steps, up to 1,000.
  const lag = await pool.query<{ n: number; oldest: Date | null }>(
    `select count(*)::int as n, min(recorded_at) as oldest from (
       select e.recorded_at from events e
       where e.global_position > coalesce((select global_position from processor_checkpoints where processor_id = $1), 0)
         and e.type <> all($2::text[])
       order by e.global_position limit 1000) x`,
    [processorId, STEP_EVENT_TYPES],
  );
  const row = lag.rows[0];
  return { leading: lock.rows[0]?.leading === true, unpublished: row?.n ?? 0, oldestUnpublishedS: row?.oldest ? (Date.now() - row.oldest.getTime()) / 1000 : null };
}

/**
 * The relay's gauges (leading, lag in transitions and seconds), read from Postgres when scraped —
 * so any process can report them: the orchestrators, and the gateway, which then shows the lag
 * growing while no orchestrator runs at all (no orchestrator, no scrape of one). `register`:
 * the process's scrape hooks (default) or an app's own (the gateway's, one per app).
 */
export function reportRelayLag(pool: Pick<pg.Pool, 'query'>, register: (refresh: () => Promise<void>) => unknown = onScrape): void {
  for (const m of [metrics.relayLeading, metrics.relayLagEvents, metrics.relayLagSeconds]) exportMetric(m);
  register(async () => {
    const s = await relayStatus(pool);
    metrics.relayLeading.set(s.leading ? 1 : 0);
    metrics.relayLagEvents.set(s.unpublished);
    metrics.relayLagSeconds.set(s.oldestUnpublishedS ?? 0);
  });
}

/** Tasks whose last relayed event the relay remembers (beyond it, a task's next event goes unlinked: its live views read Postgres). */
const MAX_LINKED_TASKS = 50_000;

/**
 * Links each event of a batch, tailed in order, to its task's previous relayed event (`last`: what
 * was published last per task, from the same unbroken tail). Returns the links and, per task the
 * batch touched, what `last` becomes once the batch is out (null: forget it — the task ended).
 * A remembered place that is not before the event (a batch sent again) links nothing.
 */
export function linkBatch(last: ReadonlyMap<string, LogCursor>, batch: readonly TailedEvent[]): { links: RelayLink[]; last: Map<string, LogCursor | null> } {
  const next = new Map<string, LogCursor | null>();
  const links = batch.map(({ event, cursor }) => {
    const known = next.has(event.taskId) ? next.get(event.taskId) : last.get(event.taskId);
    next.set(event.taskId, TERMINAL_EVENT_TYPES.has(event.type) ? null : cursor);
    return { cursor, prev: known && comesBefore(known, cursor) ? known : null };
  });
  return { links, last: next };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Wait for a wake-up (true) or `ms` (false), whichever comes first, leaving no timer behind (one per wake adds up). */
async function untilWokenOr(wakeup: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([wakeup.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
