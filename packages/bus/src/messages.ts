import { CURRENT_SCHEMA_VERSION, isStepEvent, NewEventSchema, recordAs, wakes, type RecordedEvent } from '@baton/domain';
import { toEventView, type EventView } from '@baton/api';
import type { Msg, NatsConnection } from '@nats-io/nats-core';
import { cursorToString, type LogCursor } from '@baton/event-store';
import { carrierFrom } from '@baton/telemetry';
import { z } from 'zod';
import type { BusNames, JobKind } from './subjects.ts';
import { sendSoon } from './coalesce.ts';
import { encodeLiveTicks, LiveTicks } from './live-ticks.ts';
import { outHeaders, type OutMessage } from './publisher.ts';

/** What the relay publishes for each event: the API's event object. Consumers read Postgres for what they act on, except where `recordedFromBus` applies it as the next event. */
export const BusEvent = z.object({
  id: z.uuid(),
  type: z.string().min(1),
  taskId: z.uuid(),
  streamId: z.string().min(1),
  version: z.number().int().positive(),
  position: z.number().int().positive(),
  recordedAt: z.string(),
  data: z.unknown(),
  metadata: z.unknown(),
});
export type BusEvent = z.infer<typeof BusEvent>;

/**
 * Header of a lead trigger: the schema version of the event data it carries (the sender's
 * CURRENT_SCHEMA_VERSION: a writer sends what it wrote, the relay what it read, upcast).
 */
export const EVENT_SCHEMA_HEADER = 'Baton-Schema';

/**
 * The domain event a bus message carries, for a process that applies it to what it knows of the
 * task instead of reading Postgres (`TaskCache.advance`); null when it is not an event of this
 * version's schema (`schema`, the message's EVENT_SCHEMA_HEADER, is another version or absent —
 * a sender of another release during a rolling update —, or its type, data or metadata do not
 * parse — or were left out, the event being too big to carry —, or its time is not one): the
 * message then only wakes, and the task is read. The data folded is the data as sent, as a read
 * returns it; the time is the one recorded (the writer's).
 */
export function recordedFromBus(e: BusEvent, schema: string | undefined): RecordedEvent | null {
  const recordedAt = new Date(e.recordedAt);
  if (schema !== String(CURRENT_SCHEMA_VERSION) || Number.isNaN(recordedAt.getTime())) return null;
  if (!NewEventSchema.safeParse({ id: e.id, type: e.type, data: e.data, metadata: e.metadata }).success) return null;
  return recordAs({ id: e.id, type: e.type as RecordedEvent['type'], data: e.data, metadata: e.metadata as RecordedEvent['metadata'] }, { taskId: e.taskId, streamId: e.streamId, version: e.version, position: BigInt(e.position), recordedAt });
}

export const RunnerJob = z.discriminatedUnion('kind', [
  z.object({
    /** Run (or resume) one subagent. */
    kind: z.literal('run'),
    taskId: z.uuid(),
    agentId: z.string().min(1),
    /** The event that caused the job (dispatch or decision): the job's idempotency key. */
    causeEventId: z.uuid(),
  }),
  z.object({
    /**
     * The task was cancelled or failed: kill its agents' sandboxes that are left. (On completion
     * every agent has killed its own already; the sweeper covers a crash in between.)
     */
    kind: z.literal('release'),
    taskId: z.uuid(),
    causeEventId: z.uuid(),
  }),
  z.object({
    /**
     * One agent failed while its task goes on: its sandbox goes now, not when the task ends (days
     * later, when a person is slow). A kind of its own: a runner from before it refuses the job
     * (a dead letter) — read as `release` it would have killed every agent's sandbox.
     */
    kind: z.literal('release-agent'),
    taskId: z.uuid(),
    agentId: z.string().min(1),
    causeEventId: z.uuid(),
  }),
]);
export type RunnerJob = z.infer<typeof RunnerJob>;

/**
 * The largest event a bus message carries whole. NATS refuses a message over its server's
 * max_payload (1 MiB unless configured otherwise), and the relay sends a batch again until it is
 * taken: one refused event would hold up every task's messages. A bigger event (a long result, an
 * approval of a large file's write) travels without its data (`data: null`): every consumer then
 * reads it from the log, as it does for a message it cannot apply.
 */
export const MAX_EVENT_MESSAGE_BYTES = 256 * 1024;

const encoder = new TextEncoder();

/** An event as the bus carries it: the API's event object, without its data when too big (MAX_EVENT_MESSAGE_BYTES). */
export function encodeEvent(e: RecordedEvent): Uint8Array {
  const view: EventView = toEventView(e);
  const whole = encoder.encode(JSON.stringify(view));
  return whole.byteLength <= MAX_EVENT_MESSAGE_BYTES ? whole : encoder.encode(JSON.stringify({ ...view, data: null }));
}

/**
 * Runner jobs derived from an event (the relay publishes them next to the event itself): a
 * dispatch starts a subagent, a decision on a subagent's request resumes it. The message id
 * is the cause's, so a republished event never makes a second job.
 */
export function jobsFor(e: RecordedEvent): { kind: JobKind; agentId: string; msgId: string; job: RunnerJob }[] {
  if (e.type === 'TaskCancelled' || e.type === 'TaskFailed') {
    return [{ kind: 'release', agentId: 'all', msgId: `job-${e.id}`, job: { kind: 'release', taskId: e.taskId, causeEventId: e.id } }];
  }
  if (e.type === 'SubagentFailed') {
    const agentId = e.data.agentId;
    return [{ kind: 'release', agentId, msgId: `job-${e.id}`, job: { kind: 'release-agent', taskId: e.taskId, agentId, causeEventId: e.id } }];
  }
  // One job per woken subagent; a cause that wakes several (a raised budget) gives each its own message id.
  const agents = wakes(e).subagents;
  return agents.map((agentId) => ({ kind: 'run' as const, agentId, msgId: agents.length === 1 ? `job-${e.id}` : `job-${e.id}-${agentId}`, job: { kind: 'run' as const, taskId: e.taskId, agentId, causeEventId: e.id } }));
}

/** Header of a relayed event: its place in the log (`<txid>:<position>`, commit-safe order). */
export const RELAYED_CURSOR_HEADER = 'Baton-Cursor';
/**
 * Header of a relayed event: the place of the task's previous relayed event (every event but an
 * agent's steps), which the relay vouches for having published just before it from an unbroken
 * tail. Absent when it cannot (its first event of the task since it began to lead or rewound).
 */
export const RELAYED_PREV_HEADER = 'Baton-Prev';

/** Where the relay read an event: the event's own cursor and the task's previous relayed event's (see RELAYED_PREV_HEADER). */
export interface RelayLink {
  cursor: LogCursor;
  prev: LogCursor | null;
}

/**
 * Everything the relay publishes for one event: the event, a lead trigger if it is one, and any
 * runner jobs. An agent's steps are not relayed (see STEP_EVENT_TYPES): nothing. The event goes
 * to `BATON_EVENTS` when the notifier serves it (`served`, see NotifierAudience), else as a
 * core-NATS signal that only wakes live views. With a `link`, the event carries it as headers:
 * a live view whose cursor is the link's `prev` shows the event without reading Postgres.
 */
export function messagesFor(e: RecordedEvent, names: BusNames, served = true, link?: RelayLink): OutMessage[] {
  if (isStepEvent(e.type)) return [];
  const data = encodeEvent(e);
  const trace = carrierFrom(e.metadata);
  const headers = link ? { [RELAYED_CURSOR_HEADER]: cursorToString(link.cursor), ...(link.prev ? { [RELAYED_PREV_HEADER]: cursorToString(link.prev) } : {}) } : undefined;
  const event: OutMessage = served ? { subject: names.eventSubject(e.taskId, e.type), data, msgId: e.id, trace, headers } : { subject: names.signalSubject(e.taskId, e.type), data, msgId: e.id, core: true, headers };
  return [event, ...wakeUpsFor(e, names, data)];
}

const CursorHeader = z
  .string()
  .regex(/^\d{1,20}:\d{1,20}$/, 'expected <txid>:<position>')
  .transform((s): LogCursor => {
    const [txid, position] = s.split(':') as [string, string];
    return { txid: BigInt(txid), position: BigInt(position) };
  });

/** A relayed event as a live view receives it (`readRelayed`). */
export interface RelayedEvent {
  cursor: LogCursor;
  /** The task's previous relayed event, as the relay vouches (null: it does not). */
  prev: LogCursor | null;
  /** The event itself, parsed on first use; null when the body is not the event its headers place, or came without its data (too big to carry). */
  event(): BusEvent | null;
}

/**
 * A relayed event (on a task's events or signals subject) with the place the relay gave it, or
 * null when the message has no valid place (an older relay, or not the relay's): it can only wake.
 */
export function readRelayed(m: Pick<Msg, 'headers' | 'data'>): RelayedEvent | null {
  const cursor = CursorHeader.safeParse(m.headers?.get(RELAYED_CURSOR_HEADER));
  if (!cursor.success) return null;
  const prevHeader = m.headers?.get(RELAYED_PREV_HEADER) ?? '';
  const prev = prevHeader === '' ? null : CursorHeader.safeParse(prevHeader);
  if (prev && !prev.success) return null;
  let parsed: BusEvent | null | undefined;
  return {
    cursor: cursor.data,
    prev: prev ? prev.data : null,
    event: () => {
      if (parsed !== undefined) return parsed;
      try {
        const r = BusEvent.safeParse(JSON.parse(new TextDecoder().decode(m.data)));
        // Data left out (too big to carry): the event is read from the log.
        parsed = r.success && r.data.data !== null && BigInt(r.data.position) === cursor.data.position ? r.data : null;
      } catch {
        parsed = null;
      }
      return parsed;
    },
  };
}

/**
 * The wake-ups an event causes: a lead trigger if it is one, and any runner jobs. The event is
 * encoded only for a trigger (most events a writer commits, its steps, wake nobody): `data`
 * when the caller has it already.
 */
function wakeUpsFor(e: RecordedEvent, names: BusNames, data?: Uint8Array): OutMessage[] {
  const out: OutMessage[] = [];
  const trace = carrierFrom(e.metadata);
  if (wakes(e).lead) out.push({ subject: names.triggerSubject(e.taskId, e.type), data: data ?? encodeEvent(e), msgId: `trigger-${e.id}`, trace, headers: { [EVENT_SCHEMA_HEADER]: String(CURRENT_SCHEMA_VERSION) } });
  for (const j of jobsFor(e)) out.push({ subject: names.jobSubject(j.kind, e.taskId, j.agentId), data: JSON.stringify(j.job), msgId: j.msgId, trace });
  return out;
}

/** How long a live view of a task's steps may wait for its tick after a step commits (a timer's worth: more on a busy event loop). */
export const LIVE_TICK_GAP_MS = 20;
const liveTicks = new LiveTicks(LIVE_TICK_GAP_MS, sendSoon.soon);
/** Task ids with a live tick still to send (tests, diagnostics). */
export const liveTicksDue = (): number => liveTicks.due;
/** Send the live ticks still due now (`drainNats`, before the connection drains). */
export const flushLiveTicks = (): void => liveTicks.flush();

/**
 * The fast path: a writer that has just committed events publishes their wake-ups (lead
 * triggers and runner jobs, not the events themselves) in the same turn of the event loop
 * (`sendSoon`: with the other sends of that turn, in one socket write), with the same message ids the
 * relay will use, so JetStream keeps one copy. The relay still publishes everything, so a
 * writer that dies before this costs latency, never a lost wake-up. Events proper stay
 * relay-only: observers rely on their commit order. Steps (which the relay does not carry) get
 * a live tick instead: the ids of the tasks whose steps were committed, many to a message, at
 * most one message per LIVE_TICK_GAP_MS (`LiveTicks`: a quiet process's first at the end of this
 * turn, the rest together at the end of the gap). Fire-and-forget (no PubAck wait).
 */
export function publishWakeUps(nc: Pick<NatsConnection, 'publish'> | null, names: BusNames, events: readonly RecordedEvent[]): void {
  if (!nc) return;
  // Steps were committed: their tasks' ids go in the next live tick, which wakes their live views (SSE), which read Postgres.
  const sendTick = (taskIds: string[]): void => nc.publish(names.liveTicks, encodeLiveTicks(taskIds));
  for (const e of events) if (isStepEvent(e.type)) liveTicks.tick(names.liveTicks, e.taskId, sendTick);
  for (const e of events) {
    for (const m of wakeUpsFor(e, names)) {
      const { h, span } = outHeaders(m);
      // Closed or draining connection: the relay publishes it anyway. The send is all there is to time.
      sendSoon.soon(() => {
        try {
          nc.publish(m.subject, m.data, { headers: h });
        } finally {
          span?.end();
        }
      });
    }
  }
}
