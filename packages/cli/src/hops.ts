import type { ReceivedSpan } from '@baton/telemetry';

/** One approval the bench sent: for which task, and when (epoch ms, sub-millisecond). */
export interface Approval {
  taskId: string;
  sentAtMs: number;
}

/**
 * Where one approval's time goes on its way to the lead's next model call (M2), read from the
 * services' spans, in ms. In order along the path:
 * - `http`: the client's request reaching the gateway (sent → the server span starts);
 * - `route`: the gateway before the command (routing, auth, body, reading the parked task);
 * - `append`: the command's append to the log;
 * - `publish`: after the append, until the wake-up is published (the fast path);
 * - `nats`: the wake-up's publish → the orchestrator's consumer span starts;
 * - `load`: the orchestrator, from the message to its first append (load the task, decide);
 * - `appends`: the orchestrator's appends before the model call (the tool's result);
 * - `rest`: the rest of the orchestrator's work until the model call starts;
 * - `total`: sent → the model call starts (what M2 measures).
 * Cross-process differences use each process's clock; OpenTelemetry anchors a span whose
 * parent is remote at Date.now() (whole milliseconds), so single figures are quantised to 1 ms
 * and only their mean over many approvals is meaningful.
 */
export interface Hops {
  http: number;
  route: number;
  append: number;
  publish: number;
  nats: number;
  load: number;
  appends: number;
  rest: number;
  total: number;
}

export const HOP_NAMES: Record<keyof Hops, string> = {
  http: 'HTTP to the gateway',
  route: 'gateway before the command (route, auth, read the parked task)',
  append: 'append',
  publish: 'publish the wake-up',
  nats: 'NATS to the orchestrator',
  load: 'orchestrator: load and decide',
  appends: 'orchestrator: appends',
  rest: 'orchestrator: until the model call',
  total: 'total',
};

const ms = (ns: bigint): number => Number(ns / 1000n) / 1000;

/** The hops of one approval, or null while any of its spans is missing. */
export function approvalHops(spans: readonly ReceivedSpan[], a: Approval): Hops | null {
  const command = spans.find((s) => s.name === 'baton.command' && s.attributes['baton.task_id'] === a.taskId);
  if (!command) return null;
  const http = spans.find((s) => s.kind === 2 && command.links.some((l) => l.spanId === s.spanId));
  const children = (parent: ReceivedSpan): ReceivedSpan[] => spans.filter((s) => s.parentSpanId === parent.spanId).sort((x, y) => Number(x.startNs - y.startNs));
  const underCommand = children(command);
  const append = underCommand.find((s) => s.name === 'baton.append');
  // The wake-up reaches the orchestrator from the gateway's fast path or, if that lost the race
  // or failed, from the relay (it publishes under the context the event was appended in).
  const publishes = spans.filter((s) => s.kind === 4 && s.name === 'publish triggers' && s.parentSpanId === command.spanId);
  const consumer = spans
    .filter((s) => s.kind === 5 && s.service === 'baton-orchestrator' && publishes.some((p) => p.spanId === s.parentSpanId))
    .sort((x, y) => Number(x.startNs - y.startNs))[0];
  const publish = consumer && publishes.find((p) => p.spanId === consumer.parentSpanId);
  if (!http || !append || !publish || !consumer) return null;
  const work = children(consumer);
  const chat = work.find((s) => s.attributes['gen_ai.operation.name'] === 'chat');
  if (!chat) return null;
  const before = work.filter((s) => s.startNs < chat.startNs);
  const appends = before.filter((s) => s.name === 'baton.append');
  const load = ms((before[0] ?? chat).startNs - consumer.startNs);
  const appendMs = appends.reduce((n, s) => n + ms(s.endNs - s.startNs), 0);
  const toChat = ms(chat.startNs - consumer.startNs);
  return {
    http: ms(http.startNs) - a.sentAtMs,
    route: ms(command.startNs - http.startNs),
    append: ms(append.endNs - append.startNs),
    publish: ms(publish.startNs - append.endNs),
    nats: ms(consumer.startNs - publish.startNs),
    load,
    appends: appendMs,
    rest: toChat - load - appendMs,
    total: ms(chat.startNs) - a.sentAtMs,
  };
}

/** The mean of each hop over many approvals, on one line. */
export function formatHops(all: readonly Hops[], of: number): string {
  if (all.length === 0) return `none of ${of} approvals with all its spans`;
  const mean = (k: keyof Hops): number => all.reduce((n, h) => n + h[k], 0) / all.length;
  const parts = (Object.keys(HOP_NAMES) as (keyof Hops)[]).filter((k) => k !== 'total').map((k) => `${HOP_NAMES[k]} ${mean(k).toFixed(2)}`);
  return `mean ms over ${all.length} of ${of} approvals, tracing on: ${parts.join(' | ')} | total ${mean('total').toFixed(2)}`;
}
