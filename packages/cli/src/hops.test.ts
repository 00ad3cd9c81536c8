import type { ReceivedSpan } from '@baton/telemetry';
import { describe, expect, test } from 'vitest';
import { approvalHops, formatHops } from './hops.ts';

// Times in ms from an epoch origin; spans as the OTLP receiver reports them (ns).
const T0 = 1_800_000_000_000;
const ns = (msFromT0: number): bigint => BigInt(Math.round((T0 + msFromT0) * 1e6));
let next = 0;
const span = (o: { service: string; name: string; kind: number; start: number; end: number; parent?: ReceivedSpan; attributes?: Record<string, unknown>; links?: ReceivedSpan[] }): ReceivedSpan => ({
  service: `baton-${o.service}`,
  traceId: 't',
  spanId: `s${++next}`,
  parentSpanId: o.parent?.spanId ?? null,
  name: o.name,
  kind: o.kind,
  startNs: ns(o.start),
  endNs: ns(o.end),
  attributes: o.attributes ?? {},
  links: (o.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
  statusCode: 0,
});

/** One approval's spans: sent at 0, the gateway at 0.5, the orchestrator's model call at 6. */
function approval(taskId: string, o: { viaRelay?: boolean; withChat?: boolean } = {}): ReceivedSpan[] {
  const http = span({ service: 'gateway', name: 'POST /v1/tasks/:id/approvals/:requestId', kind: 2, start: 0.5, end: 4 });
  const command = span({ service: 'gateway', name: 'baton.command', kind: 1, start: 1.5, end: 3.5, links: [http], attributes: { 'baton.task_id': taskId } });
  const append = span({ service: 'gateway', name: 'baton.append', kind: 3, start: 1.5, end: 2.9, parent: command });
  const fastPath = span({ service: 'gateway', name: 'publish triggers', kind: 4, start: 3, end: 3.1, parent: command });
  const relay = span({ service: 'orchestrator', name: 'publish triggers', kind: 4, start: 3.5, end: 3.6, parent: command });
  const consumer = span({ service: 'orchestrator', name: 'process orchestrator-task-events', kind: 5, start: o.viaRelay ? 4.5 : 4, end: 9, parent: o.viaRelay ? relay : fastPath });
  const appended = span({ service: 'orchestrator', name: 'baton.append', kind: 3, start: 5, end: 5.5, parent: consumer });
  const chat = span({ service: 'orchestrator', name: 'chat offline', kind: 3, start: 6, end: 7, parent: consumer, attributes: { 'gen_ai.operation.name': 'chat' } });
  return [http, command, append, fastPath, relay, consumer, appended, ...(o.withChat === false ? [] : [chat])];
}

describe('M2 by hop, from the spans of an approval', () => {
  test('each hop along the path, and the total from the client', () => {
    const h = approvalHops(approval('a'), { taskId: 'a', sentAtMs: T0 });
    expect(h).not.toBeNull();
    const r = Object.fromEntries(Object.entries(h!).map(([k, v]) => [k, Math.round(v * 100) / 100]));
    expect(r).toEqual({ http: 0.5, route: 1, append: 1.4, publish: 0.1, nats: 1, load: 1, appends: 0.5, rest: 0.5, total: 6 });
  });

  test('a wake-up that came through the relay is followed from the relay\'s publish', () => {
    const h = approvalHops(approval('b', { viaRelay: true }), { taskId: 'b', sentAtMs: T0 });
    expect(h?.nats).toBeCloseTo(1);
    expect(h?.publish).toBeCloseTo(0.6);
  });

  test('null while a span of the path is missing, or for another task', () => {
    expect(approvalHops(approval('c', { withChat: false }), { taskId: 'c', sentAtMs: T0 })).toBeNull();
    expect(approvalHops(approval('d'), { taskId: 'other', sentAtMs: T0 })).toBeNull();
  });

  test('the line gives the mean of each hop', () => {
    const hops = [approvalHops(approval('e'), { taskId: 'e', sentAtMs: T0 })!, { ...approvalHops(approval('f'), { taskId: 'f', sentAtMs: T0 })!, nats: 3 }];
    expect(formatHops(hops, 3)).toMatch(/^mean ms over 2 of 3 approvals, tracing on: HTTP to the gateway 0\.50 \| .* NATS to the orchestrator 2\.00 \| .* total 6\.00$/);
    expect(formatHops([], 5)).toBe('none of 5 approvals with all its spans');
  });
});
