import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { retryForever } from '@baton/runtime';
import type { Logger } from 'pino';
import { setConsumerGauges } from './consumer.ts';
import { deploymentMark, deploymentOf, ForeignBusError, type DeploymentGuard } from './deployment.ts';
import type { BusNames } from './subjects.ts';

export interface TopologyOptions extends DeploymentGuard {
  /** How long events stay in BATON_EVENTS (Postgres keeps them for ever). */
  eventsMaxAgeMs?: number;
  /** JetStream's Nats-Msg-Id dedupe window. */
  duplicateWindowMs?: number;
  ackWaitMs?: { orchestrator?: number; notifier?: number; runner?: number };
  maxAckPending?: { orchestrator?: number; notifier?: number; runner?: number };
  replicas?: number;
}

export function streamConfigs(names: BusNames, o: TopologyOptions = {}): (Partial<StreamConfig> & { name: string })[] {
  const dup = nanos(o.duplicateWindowMs ?? 120_000);
  const mark = o.deployment ? { description: deploymentMark(o.deployment) } : {};
  return [
    {
      name: names.eventsStream,
      ...mark,
      subjects: [names.allEvents, names.allTriggers],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: nanos(o.eventsMaxAgeMs ?? 7 * 24 * 3600_000),
      duplicate_window: dup,
      discard: DiscardPolicy.Old,
      num_replicas: o.replicas ?? 1,
    },
    {
      name: names.jobsStream,
      ...mark,
      subjects: [names.allJobs],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: dup,
      discard: DiscardPolicy.Old,
      num_replicas: o.replicas ?? 1,
    },
  ];
}

/**
 * Durable pull consumers. max_deliver is unlimited on the server: the consumer helper counts
 * deliveries itself and records a dead letter once they are exhausted (NATS 2.9 would leave
 * such a message un-acked in a work queue for ever).
 */
export function consumerConfigs(names: BusNames, o: TopologyOptions = {}): { stream: string; config: Partial<ConsumerConfig> }[] {
  const base = { ack_policy: AckPolicy.Explicit, max_deliver: -1, deliver_policy: DeliverPolicy.All };
  return [
    {
      stream: names.eventsStream,
      config: { ...base, durable_name: names.consumers.orchestrator, filter_subject: names.allTriggers, ack_wait: nanos(o.ackWaitMs?.orchestrator ?? 30_000), max_ack_pending: o.maxAckPending?.orchestrator ?? 1000 },
    },
    {
      stream: names.eventsStream,
      config: { ...base, durable_name: names.consumers.notifier, filter_subject: names.allEvents, ack_wait: nanos(o.ackWaitMs?.notifier ?? 30_000), max_ack_pending: o.maxAckPending?.notifier ?? 1000 },
    },
    {
      stream: names.jobsStream,
      config: { ...base, durable_name: names.consumers.runner, filter_subject: names.allJobs, ack_wait: nanos(o.ackWaitMs?.runner ?? 60_000), max_ack_pending: o.maxAckPending?.runner ?? 256 },
    },
  ];
}

/**
 * Create every stream and consumer, and update one only where its configuration differs.
 * Safe to call from every replica at every start. (Updating a consumer needlessly is not
 * harmless: on NATS 2.9 an update loses the pull requests in flight around it, and the
 * consumers then wait for their next pull.)
 *
 * With `o.deployment`, the streams are this deployment's (see deployment.ts): one marked by
 * another is taken over when no service of it answers (`o.ownerAnswers`), else refused with
 * `ForeignBusError`; one made before the marks is marked. Answers the streams taken over.
 */
export async function ensureTopology(jsm: JetStreamManager, names: BusNames, o: TopologyOptions = {}): Promise<{ takenOver: { stream: string; from: string }[] }> {
  const kept = new Set<string>();
  const takenOver: { stream: string; from: string }[] = [];
  const info = (name: string) => streamInfo(jsm, name);
  for (const cfg of streamConfigs(names, o)) {
    const name = cfg.name;
    let existing = await info(name);
    const theirs = existing && o.deployment ? deploymentOf(existing.config.description) : null;
    if (existing && theirs && theirs !== o.deployment) {
      if (!o.ownerAnswers || (await o.ownerAnswers(theirs))) throw new ForeignBusError(name, names.namespace, theirs, o.deployment as string);
      // Looked at again just before: a sibling (this deployment's other services, starting too)
      // may have taken it over meanwhile — its new stream is deleted only if it is still the old one.
      const now = await info(name);
      if (now && now.created === existing.created && deploymentOf(now.config.description) === theirs) {
        await jsm.streams.delete(name).catch((err: unknown) => (isNotFound(err) ? false : Promise.reject(err)));
        takenOver.push({ stream: name, from: theirs });
        existing = null;
      } else existing = now;
    }
    const ours = async (): Promise<void> => {
      // Another deployment's service may have made or marked it between our look and our write.
      const mark = o.deployment ? deploymentOf((await info(name))?.config.description) : null;
      if (mark && mark !== o.deployment) throw new ForeignBusError(name, names.namespace, mark, o.deployment as string);
    };
    if (!existing) {
      await addIfAbsent(() => jsm.streams.add(cfg));
      await ours();
    } else {
      kept.add(name);
      if (differs(existing.config, cfg)) {
        await jsm.streams.update(name, { ...existing.config, ...cfg });
        await ours();
      }
    }
  }
  for (const { stream, config } of consumerConfigs(names, o)) {
    const name = config.durable_name as string;
    const existing = await jsm.consumers.info(stream, name).catch((err: unknown) => (isNotFound(err) ? null : Promise.reject(err)));
    if (!existing) {
      // A consumer lost from a stream that kept its messages starts at the stream's end: the
      // events stream holds days of history, and what the consumer missed is re-fed from the
      // log. (A work queue holds only unfinished jobs: its consumer takes them all.)
      const fromNow = kept.has(stream) && stream === names.eventsStream;
      // Another service may add it between our look and our add, with the other deliver policy
      // (it created the stream, we found it kept): NATS then refuses ours as an update of its.
      await addIfAbsent(
        () => jsm.consumers.add(stream, fromNow ? { ...config, deliver_policy: DeliverPolicy.New } : config),
        () => jsm.consumers.info(stream, name).then(() => true, () => false),
      );
      continue;
    }
    const { ack_wait, max_ack_pending, filter_subject } = config;
    const wanted = { ack_wait, max_ack_pending, max_deliver: -1, ...(filter_subject ? { filter_subject } : {}) };
    if (differs(existing.config, wanted)) await jsm.consumers.update(stream, name, wanted);
  }
  return { takenOver };
}

/**
 * A worker's start: `ensureTopology`, retried while NATS cannot answer; streams of another live
 * deployment go to `o.onForeign` (a worker's exits 78) instead of being retried for ever.
 */
export async function setUpTopology(jsm: () => Promise<JetStreamManager>, names: BusNames, o: TopologyOptions, log: Logger): Promise<void> {
  const { takenOver } = await retryForever('setting up JetStream streams', log, async () => {
    try {
      return await ensureTopology(await jsm(), names, o);
    } catch (err) {
      if (err instanceof ForeignBusError) o.onForeign?.(err);
      throw err;
    }
  });
  logTakenOver(log, takenOver);
}

function logTakenOver(log: Logger, takenOver: { stream: string; from: string }[]): void {
  for (const { stream, from } of takenOver) log.warn({ stream, from }, "bus stream made for another deployment — another database on this BATON_NAMESPACE, or this one's before it was re-created — none of whose services answers: taken over (deleted and re-created from this database's log; what it held was that deployment's)");
}

/**
 * Two services re-creating the same thing at once: the loser's "already in use" is success, and
 * so is any refusal once the thing exists (`exists`: the winner's consumer, whose deliver policy
 * NATS will not "update" to ours — "deliver policy can not be updated").
 */
async function addIfAbsent(add: () => Promise<unknown>, exists?: () => Promise<boolean>): Promise<void> {
  try {
    await add();
  } catch (err) {
    const e = err as { api_error?: { err_code?: number }; message?: string };
    // 10058: stream name already in use; 10148: consumer already exists; 10013: consumer name already in use.
    if ([10058, 10148, 10013].includes(e?.api_error?.err_code ?? 0) || /already in use|already exists/i.test(e?.message ?? '')) return;
    if (exists && (await exists())) return;
    throw err;
  }
}

/** Does `actual` differ from `wanted` in any field `wanted` sets? */
export function differs(actual: object, wanted: object): boolean {
  const a = actual as Record<string, unknown>;
  return Object.entries(wanted).some(([k, v]) => v !== undefined && JSON.stringify(a[k]) !== JSON.stringify(v));
}

/** A stream's info, null when there is no such stream. */
const streamInfo = (jsm: JetStreamManager, name: string) => jsm.streams.info(name).catch((err: unknown) => (isNotFound(err) ? null : Promise.reject(err)));

function isNotFound(err: unknown): boolean {
  const e = err as { code?: number | string; message?: string; api_error?: { err_code?: number } };
  return e?.api_error?.err_code === 10059 || e?.api_error?.err_code === 10014 || /not found/i.test(e?.message ?? '');
}

/**
 * What the bus holds now: each stream's creation time (absent: missing), the consumers that are
 * missing, and the streams another deployment than `deployment` made (stream → its deployment id).
 */
export interface TopologyReport {
  streams: Record<string, string | null>;
  missingConsumers: string[];
  foreign: Record<string, string>;
}

export async function inspectTopology(jsm: JetStreamManager, names: BusNames, deployment?: string): Promise<TopologyReport> {
  const streams: Record<string, string | null> = {};
  const foreign: Record<string, string> = {};
  for (const name of [names.eventsStream, names.jobsStream]) {
    const info = await streamInfo(jsm, name);
    streams[name] = info ? info.created : null;
    const theirs = info && deployment ? deploymentOf(info.config.description) : null;
    if (theirs && theirs !== deployment) foreign[name] = theirs;
  }
  const missingConsumers: string[] = [];
  for (const { stream, config } of consumerConfigs(names)) {
    if (streams[stream] === null) {
      missingConsumers.push(config.durable_name as string);
      continue;
    }
    const info = await jsm.consumers.info(stream, config.durable_name as string).catch((err: unknown) => (isNotFound(err) ? null : Promise.reject(err)));
    if (!info) missingConsumers.push(config.durable_name as string);
  }
  return { streams, missingConsumers, foreign };
}

/**
 * Every Baton consumer's backlog (pending, unacknowledged, redelivered), read from the server when
 * scraped (`register`: an app's scrape hooks). Each consumer process reports its own; this lets
 * one process (the gateway) report them all, so a queue that grows while no runner (or no
 * orchestrator, no notifier) is running shows on a dashboard.
 */
export function reportConsumerBacklogs(nats: () => NatsConnection | null, names: BusNames, register: (refresh: () => Promise<void>) => unknown): void {
  register(async () => {
    const nc = nats();
    if (!nc || nc.isClosed()) return;
    const jsm = await jetstreamManager(nc);
    await Promise.all(consumerConfigs(names).map(async ({ stream, config }) => {
      const info = await jsm.consumers.info(stream, config.durable_name as string).catch(() => null);
      if (info) setConsumerGauges(config.durable_name as string, info);
    }));
  });
}

/** The problems a report shows, in words (empty: all there). */
export function topologyProblems(r: TopologyReport): string[] {
  return [
    ...Object.entries(r.streams).filter(([, c]) => c === null).map(([s]) => `stream ${s} is missing`),
    ...r.missingConsumers.map((c) => `consumer ${c} is missing`),
    ...Object.entries(r.foreign).map(([s, theirs]) => `stream ${s} was made for another deployment (database ${theirs})`),
  ];
}

export interface TopologyWatchOptions {
  jsm: () => Promise<JetStreamManager>;
  names: BusNames;
  topology?: TopologyOptions;
  log: Logger;
  /** How often to look (default 5 s); a consumer that reports a missing stream or consumer asks for a look at once. */
  everyMs?: number;
  /** Called after each look with what was found (and whether this look re-created anything). */
  onReport?: (r: TopologyReport, recreated: boolean) => void | Promise<void>;
  /**
   * A stream whose publishes keep failing in its store (`storeFailed`) for this long is taken
   * as broken (default 2 s: the relay retries several times meanwhile).
   */
  storeFailureConfirmMs?: number;
  /** The least time between two repairs of one stream (default 10 s). */
  repairIntervalMs?: number;
}

/** Reports of store failures this far apart belong to different episodes. */
const STORE_FAILURE_GAP_MS = 30_000;

/**
 * Every service watches the bus: when a stream or consumer is missing (deleted, or NATS came
 * back with an empty store) it is re-created at once, so consumers resume pulling. What the
 * lost streams held is re-fed from the log by the orchestrator's watchdog (it compares each
 * stream's creation time with the one it relayed into).
 *
 * A stream can also be there and broken: NATS 2.9 has been seen (under chaos: a stream deleted
 * and re-created at once while publishes poured in) to keep a stream whose block file is gone,
 * answering every publish with a store failure (10077, "error opening msg block file … no such
 * file or directory") for ever. Publishers report such answers (`storeFailed`); a stream that
 * keeps failing for `storeFailureConfirmMs` is deleted and re-created by the next look, and
 * re-fed from the log like any lost stream.
 */
export class TopologyWatch {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** The latest look's report (null before the first, or when the bus could not be inspected): what the watchdog reads. */
  report: TopologyReport | null = null;
  /** Streams deleted and re-created because their store was broken. */
  repairs = 0;
  /** Store failures reported per stream: the first and the latest of the current episode. */
  private readonly failing = new Map<string, { first: number; last: number; error: string }>();
  private readonly repairedAt = new Map<string, number>();
  private readonly o: TopologyWatchOptions & { everyMs: number; storeFailureConfirmMs: number; repairIntervalMs: number };

  constructor(o: TopologyWatchOptions) {
    this.o = { everyMs: 5000, storeFailureConfirmMs: 2000, repairIntervalMs: 10_000, ...o };
  }

  /**
   * A publish to `stream` came back with a store failure (BatchPublisher's `onStoreFailure`).
   * Once such answers have kept coming for `storeFailureConfirmMs`, the next look (at once)
   * deletes the stream and re-creates it.
   */
  storeFailed(stream: string, err: Error): void {
    if (stream !== this.o.names.eventsStream && stream !== this.o.names.jobsStream) return;
    const now = Date.now();
    const f = this.failing.get(stream);
    if (!f || now - f.last > STORE_FAILURE_GAP_MS) this.failing.set(stream, { first: now, last: now, error: err.message });
    else {
      f.last = now;
      f.error = err.message;
    }
    if (this.broken(now).length > 0) this.poke();
  }

  /** Streams to repair now: failing for long enough, and not repaired too recently. */
  private broken(now: number): string[] {
    return [...this.failing]
      .filter(([stream, f]) => f.last - f.first >= this.o.storeFailureConfirmMs && now - f.last <= STORE_FAILURE_GAP_MS && now - (this.repairedAt.get(stream) ?? 0) >= this.o.repairIntervalMs)
      .map(([stream]) => stream);
  }

  start(): void {
    this.schedule(0);
  }

  /** Look now (a consumer saw a missing stream or consumer). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** One look: report, re-create what is missing, report again. */
  async check(): Promise<TopologyReport> {
    const jsm = await this.o.jsm();
    const now = Date.now();
    for (const stream of this.broken(now)) {
      const f = this.failing.get(stream);
      this.o.log.error({ stream, failingForMs: f ? f.last - f.first : 0, error: f?.error }, 'bus stream cannot store messages (its store on the NATS server is broken): deleting it to re-create it');
      await jsm.streams.delete(stream).catch((err: unknown) => (isNotFound(err) ? false : Promise.reject(err)));
      this.failing.delete(stream);
      this.repairedAt.set(stream, now);
      this.repairs++;
    }
    const deployment = this.o.topology?.deployment;
    let report = await inspectTopology(jsm, this.o.names, deployment);
    const problems = topologyProblems(report);
    const recreated = problems.length > 0;
    if (recreated) {
      this.o.log.warn({ problems }, Object.keys(report.foreign).length > 0 ? "bus streams of another deployment: taking them over if none of its services answers" : 'bus topology incomplete; re-creating it');
      logTakenOver(this.o.log, (await ensureTopology(jsm, this.o.names, this.o.topology)).takenOver);
      report = await inspectTopology(jsm, this.o.names, deployment);
    }
    this.report = report;
    await this.o.onReport?.(report, recreated);
    return report;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.timer = null;
    this.running = this.check().then(
      () => undefined,
      (err: unknown) => {
        this.report = null;
        if (err instanceof ForeignBusError) {
          this.o.log.error({ stream: err.stream, theirs: err.theirs }, err.message);
          this.o.topology?.onForeign?.(err);
        } else this.o.log.warn({ err }, 'bus topology check failed; will retry');
      },
    );
    await this.running;
    this.running = null;
    const again = this.again;
    this.again = false;
    this.schedule(again ? 0 : this.o.everyMs);
  }
}
