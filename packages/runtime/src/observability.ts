import { serveOps, startMetrics, startTracing, type OpsServer, type Tracing } from '@baton/telemetry';
import type { Logger } from 'pino';
import { listenOrExit } from './config.ts';

/**
 * Tracing (from the OTEL_* variables; off unless an OTLP endpoint or exporter is set) and the
 * process's metrics, for a service's main, before it creates any span. Start once per process.
 */
export function startTelemetry(service: string, env: Record<string, string | undefined>, log: Logger): Tracing {
  const tracing = startTracing(service, env);
  startMetrics();
  if (tracing.enabled) log.info({ endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? null, exporter: env.OTEL_TRACES_EXPORTER ?? 'otlp' }, 'tracing on');
  return tracing;
}

/**
 * The ops port of a worker service: /healthz, /readyz (each check must resolve within 2 s) and
 * /metrics. Returns the server (its port: the one chosen when OPS_PORT is 0).
 */
export async function startOps(config: { OPS_PORT: number; OPS_HOST: string }, o: { log: Logger; checks: Record<string, () => Promise<unknown>> }): Promise<OpsServer> {
  const ops = await listenOrExit({ host: config.OPS_HOST, port: config.OPS_PORT, setting: 'OPS_PORT (0: any free port)', hostSetting: 'OPS_HOST' }, () =>
    serveOps({
      port: config.OPS_PORT,
      host: config.OPS_HOST,
      ready: async () => {
        const entries = await Promise.all(Object.entries(o.checks).map(async ([name, check]) => [name, await within(2000, check).then(() => 'ok', (err: unknown) => (err instanceof Error ? err.message : String(err)))] as const));
        const checks = Object.fromEntries(entries);
        return { ok: entries.every(([, v]) => v === 'ok'), checks };
      },
    }),
  );
  o.log.info({ port: ops.port, host: config.OPS_HOST }, 'ops port: /healthz, /readyz, /metrics');
  return ops;
}

/** `fn`'s answer, or — after `ms` — an error saying there was none (`late`: its message). */
export async function within<T>(ms: number, fn: () => Promise<T>, late = `no answer within ${ms} ms`): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([fn(), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(late)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
