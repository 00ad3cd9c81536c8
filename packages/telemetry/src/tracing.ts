import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { z } from 'zod';

export { SpanKind, SpanStatusCode, type Attributes, type Context, type Span };

/**
 * The standard OTEL_* variables Baton reads (the OTLP exporters read their own endpoint, headers,
 * timeout and compression). Tracing is on when an OTLP endpoint is set or OTEL_TRACES_EXPORTER
 * names an exporter, and OTEL_SDK_DISABLED is not "true".
 */
export const tracingEnvShape = {
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
  OTEL_TRACES_EXPORTER: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(z.enum(['otlp', 'console', 'none'], { error: 'OTEL_TRACES_EXPORTER: each entry must be otlp, console or none' })))
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url().optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { error: 'only http/protobuf and http/json are supported (not grpc)' }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { error: 'only http/protobuf and http/json are supported (not grpc)' }).optional(),
  OTEL_TRACES_SAMPLER: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).optional(),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().nonnegative().optional(),
  OTEL_BSP_MAX_QUEUE_SIZE: z.coerce.number().int().positive().optional(),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: z.coerce.number().int().positive().optional(),
  OTEL_BSP_EXPORT_TIMEOUT: z.coerce.number().int().positive().optional(),
};
const TracingEnv = z.object(tracingEnvShape);
export type TracingEnv = z.infer<typeof TracingEnv>;

/** Parse the tracing variables (empty counts as unset); throws naming every variable that is wrong. */
export function parseTracingEnv(env: Record<string, string | undefined>): TracingEnv {
  const present = Object.fromEntries(Object.keys(TracingEnv.shape).flatMap((k) => (env[k] ? [[k, env[k]]] : [])));
  const r = TracingEnv.safeParse(present);
  if (!r.success) throw new Error(`invalid tracing configuration: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

export interface Tracing {
  /** Spans are recorded and exported. */
  readonly enabled: boolean;
  /** Export what is buffered and stop (at shutdown). */
  shutdown(): Promise<void>;
  /** Export what is buffered now. */
  flush(): Promise<void>;
}

let installed: { provider: TracerProvider | null } | null = null;

/**
 * Set tracing up for this process: the context manager and the W3C propagator always (they
 * carry task ids to the logs and cost an AsyncLocalStorage per unit of work), and, when the
 * OTEL_* variables ask for it, a tracer provider that exports over OTLP/HTTP. Off, the API's
 * tracer is a no-op: spans are not recorded and events carry no `traceparent`.
 * `exporter` (tests) replaces the configured exporters.
 */
export function startTracing(service: string, env: Record<string, string | undefined> = process.env, o: { exporter?: SpanExporter } = {}): Tracing {
  const cfg = parseTracingEnv(env);
  if (installed) throw new Error('tracing is started once per process');
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const exporters = o.exporter ? [o.exporter] : exportersFor(cfg);
  const enabled = cfg.OTEL_SDK_DISABLED !== 'true' && exporters.length > 0;
  if (!enabled) {
    installed = { provider: null };
    return { enabled: false, shutdown: async () => {}, flush: async () => {} };
  }
  const resource = resourceFromAttributes({ 'service.name': `baton-${service}`, 'service.namespace': 'baton' }).merge(detectResources({ detectors: [envDetector] }));
  const processors: SpanProcessor[] = exporters.map((e) =>
    e instanceof ConsoleSpanExporter || o.exporter
      ? new SimpleSpanProcessor({ exporter: e })
      : new BatchSpanProcessor({
          exporter: e,
          ...(cfg.OTEL_BSP_SCHEDULE_DELAY !== undefined ? { scheduledDelayMillis: cfg.OTEL_BSP_SCHEDULE_DELAY } : {}),
          ...(cfg.OTEL_BSP_MAX_QUEUE_SIZE !== undefined ? { maxQueueSize: cfg.OTEL_BSP_MAX_QUEUE_SIZE } : {}),
          ...(cfg.OTEL_BSP_MAX_EXPORT_BATCH_SIZE !== undefined ? { maxExportBatchSize: cfg.OTEL_BSP_MAX_EXPORT_BATCH_SIZE } : {}),
          ...(cfg.OTEL_BSP_EXPORT_TIMEOUT !== undefined ? { exportTimeoutMillis: cfg.OTEL_BSP_EXPORT_TIMEOUT } : {}),
        }),
  );
  const provider = new TracerProvider({ resource, sampler: samplerFor(cfg), spanProcessors: processors });
  trace.setGlobalTracerProvider(provider);
  installed = { provider };
  return {
    enabled: true,
    shutdown: () => provider.shutdown(),
    flush: () => provider.forceFlush(),
  };
}

/** Undo `startTracing` (tests that start it more than once in a process). */
export async function stopTracing(): Promise<void> {
  await installed?.provider?.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
  installed = null;
}

function exportersFor(cfg: TracingEnv): SpanExporter[] {
  const names = cfg.OTEL_TRACES_EXPORTER ?? (cfg.OTEL_EXPORTER_OTLP_ENDPOINT || cfg.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? ['otlp'] : []);
  if (names.includes('none')) return [];
  return names.map((n) => {
    if (n === 'console') return new ConsoleSpanExporter();
    const protocol = cfg.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? cfg.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
    return protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtoExporter();
  });
}

function samplerFor(cfg: TracingEnv): Sampler {
  const ratio = cfg.OTEL_TRACES_SAMPLER_ARG ?? 1;
  switch (cfg.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on') {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** What `inSpan` hands its function when tracing is off: the API's non-recording span. */
const NO_SPAN: Span = trace.wrapSpanContext({ traceId: '00000000000000000000000000000000', spanId: '0000000000000000', traceFlags: 0 });

export const tracer = (): ReturnType<typeof trace.getTracer> => trace.getTracer('baton');

/** W3C trace context as carried in event metadata and NATS message headers. */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** The active span's context as a carrier; empty when nothing is traced (tracing off). */
export function currentTraceCarrier(ctx: Context = context.active()): TraceCarrier {
  const sc = trace.getSpanContext(ctx);
  if (!sc || !trace.isSpanContextValid(sc)) return {};
  const out: TraceCarrier = {};
  propagation.inject(ctx, out);
  return out;
}

/** The context a carrier names (the root context when it names none). */
export function contextFromCarrier(carrier: TraceCarrier | null | undefined): Context {
  if (!carrier?.traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The span context a carrier names, for a link (null when it names none). */
export function spanContextOf(carrier: TraceCarrier | null | undefined): SpanContext | null {
  const sc = trace.getSpanContext(contextFromCarrier(carrier));
  return sc && trace.isSpanContextValid(sc) ? sc : null;
}

/** Read a carrier from something holding unknown metadata (an event's). */
export function carrierFrom(metadata: unknown): TraceCarrier {
  if (!metadata || typeof metadata !== 'object') return {};
  const m = metadata as Record<string, unknown>;
  return { ...(typeof m.traceparent === 'string' ? { traceparent: m.traceparent } : {}), ...(typeof m.tracestate === 'string' ? { tracestate: m.tracestate } : {}) };
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** Parent context (default: the active one). */
  parent?: Context;
  links?: Link[];
}

/**
 * Run `fn` inside a new active span, which ends when `fn` settles; a throw marks it an error
 * (and is rethrown). With tracing off the span is the API's no-op and this costs a closure.
 */
export function inSpan<T>(name: string, o: SpanOptions, fn: (span: Span) => T): T {
  if (!installed?.provider) return fn(NO_SPAN);
  const parent = o.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: o.kind ?? SpanKind.INTERNAL, ...(o.attributes ? { attributes: o.attributes } : {}), ...(o.links ? { links: o.links } : {}) }, parent);
  const ctx = trace.setSpan(parent, span);
  let result: T;
  try {
    result = context.with(ctx, fn, undefined, span);
  } catch (err) {
    failSpan(span, err);
    span.end();
    throw err;
  }
  if (result instanceof Promise) {
    return result.then(
      (v: unknown) => {
        span.end();
        return v;
      },
      (err: unknown) => {
        failSpan(span, err);
        span.end();
        throw err;
      },
    ) as T;
  }
  span.end();
  return result;
}

/** Mark a span failed with an error. */
export function failSpan(span: Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}

/** Whether spans are recorded in this process (skip building attributes when not). */
export function tracingOn(): boolean {
  return installed?.provider != null;
}

/** The ids a log line carries: the active span's trace and span ids (none when nothing is traced). */
export function traceIds(ctx: Context = context.active()): { trace_id?: string; span_id?: string } {
  const sc = trace.getSpanContext(ctx);
  if (!sc || !trace.isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId };
}

export const runInContext = <T>(ctx: Context, fn: () => T): T => context.with(ctx, fn);
export const activeContext = (): Context => context.active();
export const activeSpan = (): Span | undefined => trace.getActiveSpan();

const TASK_ID = Symbol.for('baton.task_id');

/** Run `fn` with a task id in the active context: log lines written inside carry it. */
export function withTaskId<T>(taskId: string, fn: () => T): T {
  return context.with(context.active().setValue(TASK_ID, taskId), fn);
}

/** The fields a log line gets from the active context: trace and span ids, and the task id. */
export function logContext(): { trace_id?: string; span_id?: string; task_id?: string } {
  const ctx = context.active();
  const taskId = ctx.getValue(TASK_ID);
  return { ...traceIds(ctx), ...(typeof taskId === 'string' ? { task_id: taskId } : {}) };
}

/** A context with `span` as its active span. */
export const withSpan = (ctx: Context, span: Span): Context => trace.setSpan(ctx, span);
