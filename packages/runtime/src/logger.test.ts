import { inSpan, startTracing, stopTracing, withTaskId } from '@baton/telemetry';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterEach, expect, test } from 'vitest';
import { createLogger } from './logger.ts';

afterEach(() => stopTracing());

test('a log line written inside traced work on a task carries trace_id, span_id and task_id', async () => {
  startTracing('t', {}, { exporter: new InMemorySpanExporter() });
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('svc', { destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) } });
  log.info('outside');
  await withTaskId('6f1c', () => inSpan('step', {}, async () => log.info('inside')));
  expect(lines[0]).not.toHaveProperty('trace_id');
  expect(lines[1]).toMatchObject({ service: 'svc', msg: 'inside', task_id: '6f1c', trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
});
