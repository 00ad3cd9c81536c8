import { toEventView, type EventView, type RecordedEvent } from '@baton/domain';
import { z } from 'zod';
import type { JobKind } from './subjects.ts';

/** What the relay publishes for each event: the API's event object. Consumers re-read Postgres. */
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

export const RunnerJob = z.object({
  kind: z.literal('run'),
  taskId: z.uuid(),
  agentId: z.string().min(1),
  /** The event that caused the job (dispatch or answer): the job's idempotency key. */
  causeEventId: z.uuid(),
});
export type RunnerJob = z.infer<typeof RunnerJob>;

export function encodeEvent(e: RecordedEvent): Uint8Array {
  const view: EventView = toEventView(e);
  return new TextEncoder().encode(JSON.stringify(view));
}

/** Runner jobs derived from an event (the relay publishes them next to the event itself). */
export function jobsFor(e: RecordedEvent): { kind: JobKind; agentId: string; msgId: string; job: RunnerJob }[] {
  if (e.type === 'SubagentDispatched') {
    return [{ kind: 'run', agentId: e.data.agentId, msgId: `job-${e.id}`, job: { kind: 'run', taskId: e.taskId, agentId: e.data.agentId, causeEventId: e.id } }];
  }
  return [];
}
