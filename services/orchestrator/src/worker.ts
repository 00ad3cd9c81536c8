import { BusEvent, countDeadLetters, deadLetterGivesUp, deadLetterRecorder, EVENT_SCHEMA_HEADER, NotifierAudience, onTaskEnds, publishWakeUps, recordedFromBus, Relay, startConsumer, TaskEndedError, TopologyWatch, type BusNames, type DeadLetter, type RunningConsumer, type TopologyOptions } from '@baton/bus';
import { isFinal, nextDeadline } from '@baton/domain';
import { handleCommand, keepUnfinished, loadTask, type EventStore, type TaskLoader } from '@baton/event-store';
import { WEBHOOK_ENDPOINTS_CHANNEL } from '@baton/db';
import { keyedCoalesced, type Logger } from '@baton/runtime';
import { tenantsWithEndpoints } from '@baton/storage';
import { jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import { DeadlinePoller } from './deadlines.ts';
import { advanceTask, type LeadDeps } from './lead.ts';
import { Watchdog, type WatchdogOptions } from './watchdog.ts';

export interface OrchestratorDeps extends LeadDeps {
  pool: pg.Pool;
  nc: NatsConnection;
  js: JetStreamClient;
  names: BusNames;
  log: Logger;
  concurrency: number;
  maxAttempts: number;
  /** `working()` interval while a trigger is handled; below the consumer's ack_wait. */
  heartbeatMs?: number;
  relay: { enabled: boolean; batchSize: number; backstopMs: number };
  /** Drop a finished task from the process's cache: once a run here finished it, or its end is heard on the bus (`TaskCache.ended`). */
  ended?: (taskId: string) => void;
  /** Longest sleep of the deadline timer between looks at the deadline table. */
  deadlineBackstopMs?: number;
  /** The watchdog's policy and pace (see watchdog.ts). */
  watchdog?: Partial<WatchdogOptions> & { everyMs?: number; replayWindowMs?: number };
  /** How often the bus topology is checked (and re-created where missing), and its settings. */
  busCheckMs?: number;
  topology?: TopologyOptions;
}

export interface Orchestrator {
  relay: Relay | null;
  consumer: RunningConsumer;
  deadlines: DeadlinePoller;
  watchdog: Watchdog;
  topology: TopologyWatch;
  stop(): Promise<void>;
}

/** How the orchestrator loads a task: the service's (a TaskCache's incremental load), else a full read. */
const loaderOf = (d: Pick<OrchestratorDeps, 'load' | 'store'>): TaskLoader => d.load ?? ((id: string) => loadTask(d.store, id));

/** Transitions the notifier does not serve go out as signals (see NotifierAudience); the tenants with webhook endpoints are read from Postgres, again whenever it announces a change. */
function notifierAudience(d: Pick<OrchestratorDeps, 'log'>): NotifierAudience {
  const log = d.log.child({ component: 'relay' });
  return new NotifierAudience({ tenantsWithEndpoints, channel: WEBHOOK_ENDPOINTS_CHANNEL, onRefreshError: (err) => log.warn({ err }, 'relay: could not read which tenants have webhook endpoints; every transition goes to BATON_EVENTS until it can') });
}

/**
 * The orchestrator: a relay (one leader across replicas) and a consumer of task events that
 * re-reads each task from Postgres and advances it (level-triggered). Within one process,
 * work on one task is serialised to avoid needless version conflicts; across processes the
 * event store's expected-version check keeps it correct.
 */
export async function startOrchestrator(d: OrchestratorDeps): Promise<Orchestrator> {
  const jsm = () => jetstreamManager(d.nc);
  // Started below, once the watchdog it pokes exists. Publishers report streams whose store fails
  // to it (`storeFailed`): such a stream is deleted and re-created, then re-fed by the watchdog.
  const topology = new TopologyWatch({
    jsm,
    names: d.names,
    ...(d.topology ? { topology: d.topology } : {}),
    log: d.log.child({ component: 'topology' }),
    everyMs: d.busCheckMs ?? 5000,
    onReport: (_r, recreated) => {
      if (recreated) watchdog.poke();
    },
  });
  const onStoreFailure = (stream: string, err: Error): void => topology.storeFailed(stream, err);
  const relay = d.relay.enabled
    ? new Relay({ pool: d.pool, store: d.store as EventStore, nc: d.nc, names: d.names, log: d.log.child({ component: 'relay' }), batchSize: d.relay.batchSize, backstopMs: d.relay.backstopMs, onStoreFailure, audience: notifierAudience(d) })
    : null;
  relay?.start();
  // Runner jobs for dispatches go out as soon as they are committed (the relay sends them too).
  const lead: LeadDeps = { ...d, committed: (events) => publishWakeUps(d.nc, d.names, events) };
  const deadlines = new DeadlinePoller({
    pool: d.pool,
    store: d.store,
    load: loaderOf(d),
    now: d.now,
    log: d.log.child({ component: 'deadlines' }),
    backstopMs: d.deadlineBackstopMs ?? 60_000,
  });
  deadlines.start();
  const watchdog = new Watchdog({
    pool: d.pool,
    store: d.store as EventStore,
    load: loaderOf(d),
    nc: d.nc,
    jsm,
    names: d.names,
    log: d.log.child({ component: 'watchdog' }),
    now: d.now,
    topology: () => topology.report,
    relay,
    onStoreFailure,
    everyMs: d.watchdog?.everyMs ?? 5000,
    ...(d.watchdog?.replayWindowMs !== undefined ? { replayWindowMs: d.watchdog.replayWindowMs } : {}),
    options: { graceMs: d.watchdog?.graceMs ?? 30_000, maxRedispatches: d.watchdog?.maxRedispatches ?? 3, maxStalledAttempts: d.watchdog?.maxStalledAttempts ?? 5 },
  });
  topology.start();
  watchdog.start();
  // One lead run per task at a time, at most one waiting: more wake-ups meanwhile are acked at once.
  const perTask = keyedCoalesced();
  // The lead runs at work here, by task: a task that ends meanwhile (a cancel) aborts its run at
  // once — its model call too — instead of letting the call finish to be refused.
  const running = new Map<string, AbortController>();
  // …and its cached state goes (a task cancelled at the gateway is never loaded here again).
  const ends = onTaskEnds(d.nc, d.names, (taskId, type) => {
    running.get(taskId)?.abort(new TaskEndedError(taskId, type));
    d.ended?.(taskId);
  });
  const consumer = await startConsumer({
    js: d.js,
    stream: d.names.eventsStream,
    consumer: d.names.consumers.orchestrator,
    schema: BusEvent,
    log: d.log.child({ component: 'consumer' }),
    concurrency: d.concurrency,
    maxAttempts: d.maxAttempts,
    ...(d.heartbeatMs ? { heartbeatMs: d.heartbeatMs } : {}),
    onMissing: () => topology.poke(),
    onDeadLetter: leadDeadLetters(d),
    // The consumer's filter (baton.triggers.>) delivers only events that can wake the lead.
    handle: async (event, ctx) => {
      const run = await perTask(event.taskId, async () => {
        const own = new AbortController();
        running.set(event.taskId, own);
        try {
          return await advanceTask(lead, event.taskId, recordedFromBus(event, ctx.headers?.get(EVENT_SCHEMA_HEADER)), own.signal);
        } catch (err) {
          if (!(own.signal.reason instanceof TaskEndedError)) throw err;
          d.log.info({ taskId: event.taskId, reason: own.signal.reason.message }, 'lead run stopped: its task ended');
          return { appended: 0, state: (await loaderOf(d)(event.taskId)).state };
        } finally {
          if (running.get(event.taskId) === own) running.delete(event.taskId);
        }
      });
      if (!run.ran) return void d.log.debug({ taskId: event.taskId, trigger: event.type }, 'joined the lead run waiting for this task');
      const { appended, state } = run.result;
      deadlines.hint(nextDeadline(state));
      // The step that finished the task was loaded while it ran: hold nothing for it now.
      if (!keepUnfinished(state)) d.ended?.(event.taskId);
      d.log.debug({ taskId: event.taskId, trigger: event.type, appended }, 'advanced task');
    },
  });
  return {
    relay,
    consumer,
    deadlines,
    watchdog,
    topology,
    async stop() {
      ends.stop();
      await topology.stop();
      await watchdog.stop();
      await consumer.stop();
      await deadlines.stop();
      await relay?.stop();
    },
  };
}

/**
 * What a dead-lettered lead trigger does. It is recorded; one that gives its work up
 * (`deadLetterGivesUp`: its handler kept failing — the model, a bug —, or it is the task's
 * UNSETTLED_DEAD_LETTERS_TO_GIVE_UP-th unsettled one) ends the task visibly (`lead_failed`)
 * instead of leaving it running; one only cut short before that (orchestrators killed under it)
 * leaves the lead to the watchdog, which wakes it. So does one of a lead in a model outage (its
 * last model call found the API unable to answer): the agent loop ends the task
 * `model_unavailable` once the outage has lasted the model's limit.
 */
export function leadDeadLetters(d: Pick<OrchestratorDeps, 'pool' | 'store' | 'names' | 'log' | 'now' | 'load'>): (dl: DeadLetter) => Promise<void> {
  const record = deadLetterRecorder(d.pool);
  return async (dl) => {
    await record(dl);
    const event = BusEvent.safeParse(safeJson(dl.payload));
    if (!event.success) return;
    const taskId = event.data.taskId;
    const recorded = await countDeadLetters(d.pool, dl.consumer, { prefix: d.names.triggerSubject(taskId, '') });
    if (!deadLetterGivesUp(dl, recorded)) {
      d.log.warn({ taskId, error: dl.error, deadLetters: recorded }, 'lead trigger dead-lettered unsettled: the watchdog wakes the lead');
      return;
    }
    let outage = false;
    const done = await handleCommand(
      d.store,
      taskId,
      (s) => {
        outage = s.lead?.modelOutage !== undefined;
        return isFinal(s) || s.status === 'none' || outage ? null : { type: 'FailTask', code: 'lead_failed', message: `the lead could not take its step after ${dl.deliveries} attempts: ${dl.error}` };
      },
      { load: loaderOf(d), metadata: { actor: 'baton:orchestrator' }, now: d.now },
    );
    if (outage) d.log.warn({ taskId, error: dl.error }, 'lead trigger dead-lettered while the model API could not answer: the watchdog wakes the lead');
    else if (done.events.length > 0) d.log.error({ taskId, error: dl.error }, 'lead failed for good: task failed');
  };
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}
