import { createHash } from 'node:crypto';
import { BatchPublisher, encodeEvent, type BusNames, type OutMessage, type Relay, type RunnerJob, type TopologyReport } from '@baton/bus';
import { activeAgents, hasMachineWork, isFinal, leadNeedsTurn, type Command, type TaskState } from '@baton/domain';
import { handleCommand, type EventStore, type TaskLoader } from '@baton/event-store';
import type { Logger } from '@baton/runtime';
import { carrierFrom } from '@baton/telemetry';
import { dropLeases, leasesOfTask, noteRedispatch, recordedStreams, recordStream, unfinishedTasks, watchCandidates, WATCHDOG_HOLDER, type Lease } from '@baton/storage';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';

export interface WatchdogOptions {
  /** No transition for this long, with work no person holds: look at the task (default 30 s). */
  graceMs: number;
  /** Re-dispatches of one attempt before the agent fails `agent_lost` (default 3). */
  maxRedispatches: number;
  /** Attempts in a row that recorded nothing before a lost agent fails `agent_lost` instead of starting again (default 5). */
  maxStalledAttempts: number;
}

/** What the watchdog does for one task: wake its lead, re-dispatch agents, or fail those it gave up on. */
export interface WatchdogActions {
  trigger: boolean;
  redispatch: string[];
  fail: { agentId: string; message: string }[];
  /** Leases of agents that are no longer active (or of a finished task): dropped. */
  dropLeases: string[];
}

/**
 * The watchdog's policy for one task (pure). The lead is woken when it has a turn to take (the
 * orchestrator handles wake-ups idempotently). An active agent with a live lease is left
 * alone; one without (never claimed, its runner gone) is re-dispatched — unless its attempt was
 * re-dispatched `maxRedispatches` times already and no job is waiting in the queue (a busy
 * queue explains a slow claim), then it fails visibly with what the lease knew; or unless its
 * last `maxStalledAttempts` attempts were each started and lost without recording anything (its
 * runner keeps dying on it: starting it again would loop forever), then it fails too.
 */
export function watchdogActions(s: TaskState, leases: readonly Lease[], now: Date, o: { maxRedispatches: number; maxStalledAttempts: number; jobsBacklog: boolean }): WatchdogActions {
  const out: WatchdogActions = { trigger: false, redispatch: [], fail: [], dropLeases: [] };
  const byAgent = new Map(leases.map((l) => [l.agentId, l]));
  if (isFinal(s)) {
    out.dropLeases = leases.map((l) => l.agentId);
    return out;
  }
  out.trigger = s.lead === null || leadNeedsTurn(s);
  const active = new Set(activeAgents(s).map((a) => a.id));
  out.dropLeases = leases.filter((l) => !active.has(l.agentId)).map((l) => l.agentId);
  for (const a of activeAgents(s)) {
    const l = byAgent.get(a.id);
    if (l && l.holder !== WATCHDOG_HOLDER && l.expiresAt > now) continue; // being worked on
    const last = l?.lastError ? ` Last error: ${l.lastError}` : '';
    if (a.status === 'running' && a.stalledAttempts >= o.maxStalledAttempts) {
      out.fail.push({ agentId: a.id, message: `agent ${a.id} lost ${a.stalledAttempts} attempts in a row (the last: attempt ${a.attempt}), each ended before it recorded a turn — its runner died (a crash, out of memory, a kill) or failed it at once (see the last error, if any); attempts a stopping runner handed back do not count. Given up rather than started again.${last}` });
      continue;
    }
    const tried = l?.holder === WATCHDOG_HOLDER && l.attempt === a.attempt ? l.fires : 0;
    if (tried >= o.maxRedispatches && !o.jobsBacklog) {
      out.fail.push({ agentId: a.id, message: `no runner kept agent ${a.id} (attempt ${a.attempt}) alive: re-dispatched ${tried} times without progress.${last}` });
    } else out.redispatch.push(a.id);
  }
  return out;
}

interface Redispatch {
  taskId: string;
  agentId: string;
  attempt: number;
}

export interface WatchdogDeps {
  pool: pg.Pool;
  store: EventStore;
  load: TaskLoader;
  nc: NatsConnection;
  jsm: () => Promise<JetStreamManager>;
  names: BusNames;
  log: Logger;
  now: () => Date;
  /** The bus as this process's TopologyWatch last saw it (null: not looked yet, or NATS unreachable). */
  topology: () => TopologyReport | null;
  /** The relay of this process (the watchdog acts where the relay leads, so it can rewind it). */
  relay: Relay | null;
  /** A stream answered a publish with a store failure (the TopologyWatch's `storeFailed`). */
  onStoreFailure?: (stream: string, err: Error) => void;
  everyMs: number;
  /** How far back the relay re-publishes after the bus lost its streams (default 10 min). */
  replayWindowMs?: number;
  options: WatchdogOptions;
}

/**
 * One per deployment, where the relay leads (a Postgres advisory lock when no relay runs
 * here): no timer per task. Each look:
 * 1. compares each JetStream stream's creation time with the one the log was relayed into —
 *    a new stream lost what the old one held, so the relay re-publishes the recent log and every
 *    unfinished task gets its due wake-ups again (message ids make repeats harmless);
 * 2. looks at tasks with work no person holds and no transition for the grace period, or an
 *    expired lease, and applies `watchdogActions`.
 */
export class Watchdog {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private again = false;
  private lockClient: pg.PoolClient | null = null;
  private publisher: BatchPublisher | null = null;
  /** Tasks looked at recently (taskId → when): each is looked at most once per grace period. */
  private readonly looked = new Map<string, number>();
  heals = 0;
  /** Tasks visited by the regular looks (a heal's visits not counted). */
  visits = 0;
  redispatched = 0;
  failed = 0;
  private readonly d: WatchdogDeps;

  constructor(d: WatchdogDeps) {
    this.d = d;
  }

  start(): void {
    const onStoreFailure = this.d.onStoreFailure;
    this.publisher = new BatchPublisher(this.d.nc, onStoreFailure ? { onStoreFailure } : {});
    this.schedule(0);
  }

  /** Look now (the topology watch re-created something). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    this.publisher?.close();
    this.releaseLock();
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.timer = null;
    this.running = this.look().catch((err: unknown) => this.d.log.warn({ err }, 'watchdog: look failed; will retry'));
    await this.running;
    this.running = null;
    const again = this.again;
    this.again = false;
    this.schedule(again ? 0 : this.d.everyMs);
  }

  /** Does this process lead? Where the relay runs, its leadership; else a lock of our own. */
  private async leads(): Promise<boolean> {
    if (this.d.relay) return this.d.relay.leader;
    if (!this.lockClient) {
      const c = await this.d.pool.connect();
      c.on('error', () => this.releaseLock());
      this.lockClient = c;
    }
    const r = await this.lockClient.query<{ ok: boolean }>(`select pg_try_advisory_lock(hashtext('baton-watchdog')) as ok`);
    return r.rows[0]?.ok === true;
  }

  private releaseLock(): void {
    const c = this.lockClient;
    this.lockClient = null;
    try {
      c?.release(true);
    } catch {
      /* already gone */
    }
  }

  /** One look. */
  private async look(): Promise<void> {
    const report = this.d.topology();
    if (!report || !(await this.leads())) return;
    // A stream whose creation time differs from the recorded one (or a missing one) lost what it held.
    const recorded = await recordedStreams(this.d.pool);
    if (Object.entries(report.streams).some(([name, created]) => created === null || recorded.get(name) !== created)) {
      await this.heal(report, recorded.size === 0);
      return;
    }
    const jsm = await this.d.jsm();
    const { backlog, deliveredSeq } = await this.jobsBacklog(jsm);
    const waiting = (subject: string): Promise<boolean> => jobWaiting(jsm, this.d.names.jobsStream, subject, deliveredSeq);
    const now = this.d.now();
    const cutoff = now.getTime() - this.d.options.graceMs;
    for (const [id, at] of this.looked) if (at < cutoff) this.looked.delete(id);
    // A task looked at within the grace period waits for the next one — unless a runner's lease of
    // it ran out or was handed back since (a runner died: its agents are re-dispatched now).
    const ids = (await watchCandidates(this.d.pool, this.d.options.graceMs)).filter((c) => {
      const at = this.looked.get(c.id);
      return at === undefined || (c.leaseLostAt !== null && c.leaseLostAt.getTime() > at);
    }).map((c) => c.id);
    const messages: OutMessage[] = [];
    const sent: Redispatch[] = [];
    for (const id of ids) {
      this.looked.set(id, now.getTime());
      this.visits++;
      const v = await this.visit(id, backlog, now, `w${now.getTime()}`, waiting);
      messages.push(...v.messages);
      sent.push(...v.redispatched);
    }
    await this.publish(messages);
    // Counted once the jobs are on the bus (a publish that failed re-sends next look, uncounted), and
    // only when no job waited in the queue: runners that were busy or away explain a job not taken,
    // and a queue they drain later hands out jobs a runner has taken but not yet claimed.
    for (const r of sent) await noteRedispatch(this.d.pool, r.taskId, r.agentId, r.attempt, !backlog);
  }

  /** `first`: no stream was recorded yet (a first start: wake-ups only, nothing to re-publish). */
  private async heal(report: TopologyReport, first: boolean): Promise<void> {
    if (Object.values(report.streams).some((c) => c === null)) return; // the topology watch re-creates them; next look heals
    if (!first) {
      this.heals++;
      const since = new Date(this.d.now().getTime() - (this.d.replayWindowMs ?? 600_000));
      this.d.log.warn({ streams: report.streams, since }, 'watchdog: the bus lost its streams; re-feeding them from the log');
      const cursor = await this.d.store.cursorBefore(since);
      if (cursor) this.d.relay?.rewind(cursor);
    }
    // Every unfinished task gets its due wake-ups (on first start too: the log may predate these streams).
    const epoch = Object.values(report.streams).join('|');
    let after: string | null = null;
    const now = this.d.now();
    for (;;) {
      const ids = await unfinishedTasks(this.d.pool, after);
      if (ids.length === 0) break;
      const messages: OutMessage[] = [];
      for (const id of ids) messages.push(...(await this.visit(id, true, now, `heal-${hashOf(epoch)}`)).messages);
      await this.publish(messages);
      after = ids[ids.length - 1] as string;
    }
    for (const [name, created] of Object.entries(report.streams)) if (created) await recordStream(this.d.pool, name, created);
  }

  /** Whether jobs wait for a runner, and the last job a runner was handed (its stream sequence; null: cannot tell). */
  private async jobsBacklog(jsm: JetStreamManager): Promise<{ backlog: boolean; deliveredSeq: number | null }> {
    try {
      const info = await jsm.consumers.info(this.d.names.jobsStream, this.d.names.consumers.runner);
      return { backlog: info.num_pending > 0, deliveredSeq: info.delivered.stream_seq };
    } catch {
      return { backlog: true, deliveredSeq: null }; // cannot tell: do not give up on anyone
    }
  }

  /**
   * Apply the policy to one task; returns the wake-ups to publish and the re-dispatches among
   * them (the regular look counts those against the attempt; a heal re-sends what the bus lost,
   * which is no sign the agent is unrunnable, so it does not count them). `jobWaits`: whether a
   * job on a subject still waits for a runner (an agent with one gets no other; a heal has none).
   */
  private async visit(taskId: string, backlog: boolean, now: Date, tag: string, jobWaits?: (subject: string) => Promise<boolean>): Promise<{ messages: OutMessage[]; redispatched: Redispatch[] }> {
    try {
      const { state, events } = await this.d.load(taskId);
      if (state.status === 'none') return { messages: [], redispatched: [] };
      const leases = await leasesOfTask(this.d.pool, taskId);
      const a = watchdogActions(state, leases, now, { maxRedispatches: this.d.options.maxRedispatches, maxStalledAttempts: this.d.options.maxStalledAttempts, jobsBacklog: backlog });
      if (a.dropLeases.length > 0) await dropLeases(this.d.pool, taskId, a.dropLeases);
      if (a.fail.length > 0) {
        // Only agents still active at the attempt looked at (a runner may have moved on since).
        const fails = (s: TaskState): Command[] | null => {
          const cmds: Command[] = a.fail.filter((f) => s.agents[f.agentId]?.attempt === state.agents[f.agentId]?.attempt && activeAgents(s).some((x) => x.id === f.agentId)).map((f) => ({ type: 'FailSubagent', agentId: f.agentId, code: 'agent_lost', message: f.message }));
          return cmds.length > 0 ? cmds : null;
        };
        await handleCommand(this.d.store, taskId, fails, { load: this.d.load, metadata: { actor: 'baton:watchdog' }, now: this.d.now }).catch((err: unknown) => this.d.log.warn({ err, taskId }, 'watchdog: could not fail the agent'));
        await dropLeases(this.d.pool, taskId, a.fail.map((f) => f.agentId));
        this.failed += a.fail.length;
        this.d.log.error({ taskId, agents: a.fail }, 'watchdog: gave up on agents');
      }
      const last = events[events.length - 1];
      if (!last) return { messages: [], redispatched: [] };
      const out: OutMessage[] = [];
      const redispatched: Redispatch[] = [];
      // A wake-up continues the task's trace from its last event (a watchdog span of its own would cut it).
      const trace = carrierFrom(last.metadata);
      if (a.trigger && hasMachineWork(state)) {
        out.push({ subject: this.d.names.triggerSubject(taskId, 'Watchdog'), data: encodeEvent(last), msgId: `${tag}-${taskId}-lead-${state.version}`, trace });
      }
      for (const agentId of a.redispatch) {
        const agent = state.agents[agentId];
        const subject = this.d.names.jobSubject('run', taskId, agentId);
        // A job of the agent's still waiting in the queue, handed to no runner, runs it: another
        // would only wait beside it — while no runner ran, every look had queued one more per
        // stuck agent. (A heal asks nothing: the bus lost them.)
        if (await jobWaits?.(subject)) continue;
        redispatched.push({ taskId, agentId, attempt: agent?.attempt ?? 0 });
        const job: RunnerJob = { kind: 'run', taskId, agentId, causeEventId: last.id };
        out.push({ subject, data: JSON.stringify(job), msgId: `${tag}-${taskId}-${agentId}-${agent?.attempt ?? 0}`, trace });
        this.redispatched++;
      }
      if (out.length > 0) this.d.log.warn({ taskId, lead: a.trigger, agents: redispatched.map((r) => r.agentId), tag }, 'watchdog: waking a task that made no progress');
      return { messages: out, redispatched };
    } catch (err) {
      this.d.log.warn({ err, taskId }, 'watchdog: could not look at the task');
      return { messages: [], redispatched: [] };
    }
  }

  private async publish(messages: OutMessage[]): Promise<void> {
    if (messages.length > 0) await this.publisher?.publishAll(messages);
  }
}

function hashOf(s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, 12);
}

/**
 * Is a job on `subject` waiting in the jobs stream, handed to no runner yet (after `deliveredSeq`,
 * the runners' consumer's last delivered stream sequence)? One handed to a runner that died comes
 * back only after its ack wait: the watchdog re-dispatches then, as before. Cannot tell: no.
 */
async function jobWaiting(jsm: JetStreamManager, stream: string, subject: string, deliveredSeq: number | null): Promise<boolean> {
  if (deliveredSeq === null) return false;
  try {
    const m = await jsm.streams.getMessage(stream, { last_by_subj: subject });
    return m !== null && m.seq > deliveredSeq;
  } catch {
    return false;
  }
}
