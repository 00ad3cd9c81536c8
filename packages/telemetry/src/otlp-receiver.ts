import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/JSON export carries it, with its service's name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  /** 2: error. */
  statusCode: number;
}

export interface OtlpReceiver {
  /** The base URL to give OTEL_EXPORTER_OTLP_ENDPOINT (traces are POSTed to /v1/traces). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request body as received (one OTLP ExportTraceServiceRequest in JSON per element). */
  readonly bodies: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: AnyValue[] } };
const valueOf = (v: AnyValue | undefined): unknown =>
  v === undefined ? undefined : v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue ?? v.arrayValue?.values?.map(valueOf);
const attrs = (list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

/**
 * An OTLP/HTTP trace receiver (JSON encoding: set OTEL_EXPORTER_OTLP_PROTOCOL=http/json) on a free
 * loopback port, standing in for an OpenTelemetry collector: the services' real exporters send to
 * it, and a test reads the spans back.
 */
export async function otlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !/json/.test(req.headers['content-type'] ?? '')) {
        res.writeHead(415, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST /v1/traces with application/json only' }));
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      bodies.push(body);
      const parsed = JSON.parse(body) as {
        resourceSpans?: { resource?: { attributes?: { key: string; value: AnyValue }[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[];
      };
      for (const rs of parsed.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)['service.name'] ?? 'unknown');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              service,
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: s.parentSpanId ? String(s.parentSpanId) : null,
              name: String(s.name),
              kind: Number(s.kind ?? 0),
              startNs: BigInt(String(s.startTimeUnixNano ?? 0)),
              endNs: BigInt(String(s.endTimeUnixNano ?? 0)),
              attributes: attrs(s.attributes as { key: string; value: AnyValue }[] | undefined),
              links: ((s.links as { traceId: string; spanId: string }[] | undefined) ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              statusCode: Number((s.status as { code?: number } | undefined)?.code ?? 0),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
