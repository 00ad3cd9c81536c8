import { describe, expect, test } from 'vitest';
import { metrics } from './metrics.ts';
import { serveOps } from './ops-server.ts';

describe('the ops port', () => {
  test('/healthz, /readyz (200 or 503 naming what is wrong), /metrics in Prometheus format, and clear errors for the rest', async () => {
    let ready = true;
    const ops = await serveOps({ port: 0, host: '127.0.0.1', ready: async () => ({ ok: ready, checks: { postgres: ready ? 'ok' : 'connection refused' } }) });
    const base = `http://127.0.0.1:${ops.port}`;
    try {
      expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: 'ok' });
      expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready', checks: { postgres: 'ok' } });
      ready = false;
      const notReady = await fetch(`${base}/readyz`);
      expect(notReady.status).toBe(503);
      expect(await notReady.json()).toEqual({ status: 'not_ready', checks: { postgres: 'connection refused' } });
      metrics.jobs.inc({ kind: 'run', outcome: 'completed' });
      const m = await fetch(`${base}/metrics`);
      expect(m.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(await m.text()).toMatch(/^baton_runner_jobs_total\{kind="run",outcome="completed"\} [1-9]/m);
      const missing = await fetch(`${base}/nope`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { message: string } }).error.message).toMatch(/try \/healthz, \/readyz or \/metrics/);
      expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await ops.close();
    }
  });
});
