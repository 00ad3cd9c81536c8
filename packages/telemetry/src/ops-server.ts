import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { METRICS_CONTENT_TYPE, renderMetrics } from './metrics.ts';

export interface Readiness {
  ok: boolean;
  /** What was checked, each "ok" or what is wrong. */
  checks: Record<string, string>;
}

export interface OpsServer {
  /** The port it listens on (the one asked for, or the one the system chose for 0). */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The small HTTP server of a service that has no API of its own (orchestrator, runner, notifier):
 * GET /healthz (200 while the process serves), GET /readyz (200 or 503 with what is wrong, for
 * Kubernetes probes) and GET /metrics (Prometheus). Port 0 picks a free one.
 */
export async function serveOps(o: { port: number; host?: string; ready: () => Promise<Readiness> }): Promise<OpsServer> {
  const server: Server = createServer((req, res) => {
    const send = (status: number, type: string, body: string): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'application/json', JSON.stringify({ error: { code: 'method_not_allowed', message: `${req.method} is not allowed; use GET` } }));
    if (path === '/healthz') return send(200, 'application/json', JSON.stringify({ status: 'ok' }));
    if (path === '/readyz') {
      o.ready().then(
        (r) => send(r.ok ? 200 : 503, 'application/json', JSON.stringify({ status: r.ok ? 'ready' : 'not_ready', checks: r.checks })),
        (err: unknown) => send(503, 'application/json', JSON.stringify({ status: 'not_ready', checks: { readiness: `check failed: ${err instanceof Error ? err.message : String(err)}` } })),
      );
      return;
    }
    if (path === '/metrics') {
      renderMetrics().then(
        (text) => send(200, METRICS_CONTENT_TYPE, text),
        (err: unknown) => send(500, 'text/plain', `metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
      );
      return;
    }
    send(404, 'application/json', JSON.stringify({ error: { code: 'not_found', message: `no ${path} here; try /healthz, /readyz or /metrics` } }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
