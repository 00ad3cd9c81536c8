import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, test } from 'vitest';
import { contextFromCarrier, currentTraceCarrier, inSpan, logContext, parseTracingEnv, runInContext, SpanKind, startTracing, stopTracing, tracingOn, withTaskId } from './tracing.ts';

afterEach(async () => {
  await stopTracing();
});

describe('tracing configuration (the standard OTEL_* variables)', () => {
  test('off unless an OTLP endpoint or an exporter is named; OTEL_SDK_DISABLED and "none" turn it off', async () => {
    expect(startTracing('t', {}).enabled).toBe(false);
    expect(tracingOn()).toBe(false);
    await stopTracing();
    expect(startTracing('t', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).enabled).toBe(true);
    await stopTracing();
    expect(startTracing('t', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }).enabled).toBe(false);
    await stopTracing();
    expect(startTracing('t', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }).enabled).toBe(false);
    await stopTracing();
    expect(startTracing('t', { OTEL_TRACES_EXPORTER: 'console' }).enabled).toBe(true);
  });

  test('a wrong variable is named; empty ones count as unset', () => {
    expect(() => parseTracingEnv({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL: only http\/protobuf and http\/json are supported \(not grpc\)/);
    expect(() => parseTracingEnv({ OTEL_TRACES_EXPORTER: 'otlp,zipkin' })).toThrow(/OTEL_TRACES_EXPORTER/);
    expect(() => parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => parseTracingEnv({ OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_EXPORTER: 'otlp, console' })).toEqual({ OTEL_TRACES_EXPORTER: ['otlp', 'console'] });
  });
});

describe('spans and W3C carriers', () => {
  test('off: inSpan runs the function with a no-op span, and nothing carries a traceparent', () => {
    startTracing('t', {});
    const out = inSpan('x', {}, (span) => {
      expect(span.isRecording()).toBe(false);
      return currentTraceCarrier();
    });
    expect(out).toEqual({});
  });

  test('on: nested spans, a carrier that continues the trace in another context, errors marked', async () => {
    const exporter = new InMemorySpanExporter();
    startTracing('t', {}, { exporter });
    let carrier = {};
    await inSpan('outer', { kind: SpanKind.SERVER }, async () => {
      await inSpan('inner', {}, async () => {
        carrier = currentTraceCarrier();
      });
    });
    expect(carrier).toEqual({ traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/) });
    // Elsewhere (another process, after NATS): a span under the carrier's context joins the trace.
    runInContext(contextFromCarrier(carrier), () => inSpan('remote', { kind: SpanKind.CONSUMER }, () => undefined));
    expect(() => inSpan('fails', {}, () => {
      throw new Error('boom');
    })).toThrow('boom');
    const spans = exporter.getFinishedSpans();
    const by = Object.fromEntries(spans.map((s) => [s.name, s]));
    expect(by.inner?.parentSpanContext?.spanId).toBe(by.outer?.spanContext().spanId);
    expect(by.remote?.spanContext().traceId).toBe(by.outer?.spanContext().traceId);
    expect(by.remote?.parentSpanContext?.spanId).toBe(by.inner?.spanContext().spanId);
    expect(by.fails?.status).toMatchObject({ code: 2, message: 'boom' });
    expect(by.outer?.resource.attributes['service.name']).toBe('baton-t');
  });

  test('a log line inside traced, task-scoped work gets the trace, span and task ids', async () => {
    const exporter = new InMemorySpanExporter();
    startTracing('t', {}, { exporter });
    expect(logContext()).toEqual({});
    const seen = await withTaskId('task-1', () => inSpan('work', {}, async () => logContext()));
    const span = exporter.getFinishedSpans()[0];
    expect(seen).toEqual({ trace_id: span?.spanContext().traceId, span_id: span?.spanContext().spanId, task_id: 'task-1' });
  });
});
