import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import type { BusNames } from './subjects.ts';

export interface TopologyOptions {
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
  return [
    {
      name: names.eventsStream,
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
 */
export async function ensureTopology(jsm: JetStreamManager, names: BusNames, o: TopologyOptions = {}): Promise<void> {
  for (const cfg of streamConfigs(names, o)) {
    const name = cfg.name;
    const existing = await jsm.streams.info(name).catch((err: unknown) => (isNotFound(err) ? null : Promise.reject(err)));
    if (!existing) await jsm.streams.add(cfg);
    else if (differs(existing.config, cfg)) await jsm.streams.update(name, { ...existing.config, ...cfg });
  }
  for (const { stream, config } of consumerConfigs(names, o)) {
    const name = config.durable_name as string;
    const existing = await jsm.consumers.info(stream, name).catch((err: unknown) => (isNotFound(err) ? null : Promise.reject(err)));
    if (!existing) {
      await jsm.consumers.add(stream, config);
      continue;
    }
    const { ack_wait, max_ack_pending, filter_subject } = config;
    const wanted = { ack_wait, max_ack_pending, max_deliver: -1, ...(filter_subject ? { filter_subject } : {}) };
    if (differs(existing.config, wanted)) await jsm.consumers.update(stream, name, wanted);
  }
}

/** Does `actual` differ from `wanted` in any field `wanted` sets? */
export function differs(actual: object, wanted: object): boolean {
  const a = actual as Record<string, unknown>;
  return Object.entries(wanted).some(([k, v]) => v !== undefined && JSON.stringify(a[k]) !== JSON.stringify(v));
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: number | string; message?: string; api_error?: { err_code?: number } };
  return e?.api_error?.err_code === 10059 || e?.api_error?.err_code === 10014 || /not found/i.test(e?.message ?? '');
}
