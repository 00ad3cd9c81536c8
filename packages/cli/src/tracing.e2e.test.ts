import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TaskView } from '@baton/api';
import { busNames, connectNats, requestDiagnostics } from '@baton/bus';
import { silentLogger } from '@baton/runtime';
import { otlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@baton/telemetry';
import { testPool, waitFor, webhookReceiver, type WebhookReceiver } from '@baton/testing';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';
import { freePort } from './procs.ts';

const SERVICES = ['gateway', 'orchestrator', 'sandbox-runner', 'notifier'] as const;
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const hasPrometheus = spawnSync('prometheus', ['--version'], { stdio: 'ignore' }).status === 0;
const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/**
 * A research run with a plan approval and a webhook, the four services as processes exporting
 * OTLP to a receiver: one trace per task from the HTTP request to the report, and every service's
 * metrics and probes.
 */
describe('traces across the bus and metrics from every service', () => {
  let stack: E2eStack;
  let otlp: OtlpReceiver;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let hookServer: WebhookReceiver;

  beforeAll(async () => {
    hookServer = await webhookReceiver();
    otlp = await otlpReceiver();
    stack = await startE2eStack('tracing', {
      env: () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }),
    });
    nc = await connectNats(process.env.NATS_URL ?? 'nats://127.0.0.1:4222', 'tracing-test', silentLogger());
  }, 90_000);
  afterAll(async () => {
    await nc?.close();
    await stack?.stop();
    await otlp?.close();
    await hookServer?.close();
  });

  test('one trace per task: HTTP → append → relay → NATS → orchestrator → runner → notifier, GenAI spans for model and tool calls, the approval joined to it', async () => {
    const { api } = stack;
    const hook = hookServer.url();
    const submitted = await api.request<TaskView>('POST', '/v1/tasks', {
      prompt: 'Research how durable execution engines recover from crashes and write a short report',
      requirePlanApproval: true,
      webhook: { url: hook, events: ['task.completed'] },
    });
    const taskId = submitted.id;
    await waitFor(async () => (await api.task(taskId)).pendingRequests.some((r) => r.kind === 'approval'), { timeoutMs: 30_000, what: 'the plan to wait for approval' });
    // A person approves what the lead plans (each delegation it asks about) until the report is done.
    let approved = 0;
    await waitFor(
      async () => {
        const t = await api.task(taskId);
        for (const r of t.pendingRequests.filter((x) => x.kind === 'approval')) {
          await api.approve(taskId, r.requestId);
          approved++;
        }
        return t.status === 'completed';
      },
      { timeoutMs: 60_000, intervalMs: 100, what: 'the task to complete' },
    );
    expect(approved).toBeGreaterThan(0);
    await waitFor(() => hookServer.types().includes('task.completed'), { timeoutMs: 30_000, what: 'the completion webhook' });

    // The task's trace is the one its submission started, named in the first event's metadata.
    const db = testPool(stack.dbUrl, { max: 1 });
    const first = (await db.query<{ metadata: { traceparent?: string } }>(`select metadata from events where task_id = $1 order by global_position limit 1`, [taskId])).rows[0];
    await db.end();
    const traceId = /^00-([0-9a-f]{32})-[0-9a-f]{16}-0[01]$/.exec(first?.metadata.traceparent ?? '')?.[1];
    expect(traceId, 'TaskSubmitted carries a W3C traceparent').toBeTruthy();

    const inTrace = (): ReceivedSpan[] => otlp.spans.filter((s) => s.traceId === traceId);
    const has = (pred: (s: ReceivedSpan) => boolean) => inTrace().some(pred);
    await waitFor(() => has((s) => s.service === 'baton-notifier' && s.name === 'POST' && s.kind === KIND.client), { timeoutMs: 30_000, what: 'the webhook delivery span to be exported' });
    await waitFor(() => SERVICES.every((svc) => has((s) => s.service === `baton-${svc}`)), { timeoutMs: 30_000, what: 'spans of all four services in the task trace' });
    // A span is exported when it ends, a parent after its children: wait until every parent is in.
    const orphansOf = (spans: ReceivedSpan[]) => {
      const ids = new Set(spans.map((s) => s.spanId));
      return spans.filter((s) => s.parentSpanId && !ids.has(s.parentSpanId)).map((s) => `${s.service} ${s.name}`);
    };
    await waitFor(() => orphansOf(inTrace()).length === 0, { timeoutMs: 30_000, what: 'the parent of every span in the trace to be exported (a hop without a traceparent leaves an orphan)' }).catch(() => undefined);

    const spans = inTrace();
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    // The root: the gateway's server span of the submission.
    const roots = spans.filter((s) => !s.parentSpanId);
    expect(roots.map((s) => `${s.service} ${s.name}`)).toEqual(['baton-gateway POST /v1/tasks']);
    // Every other span's parent is in the same trace (nothing orphaned by a hop without headers).
    expect(orphansOf(spans)).toEqual([]);

    // Appends, relay/fast-path publishes and consumer spans that continue them across NATS.
    expect(has((s) => s.name === 'baton.append' && s.service === 'baton-gateway')).toBe(true);
    const consumers = spans.filter((s) => s.kind === KIND.consumer);
    for (const svc of ['orchestrator', 'sandbox-runner', 'notifier']) {
      const c = consumers.find((s) => s.service === `baton-${svc}`);
      expect(c, `a consumer span in ${svc}`).toBeTruthy();
      expect(byId.get(c?.parentSpanId ?? '')?.kind, `${svc}'s consumer span continues a producer span`).toBe(KIND.producer);
      expect(c?.attributes['baton.task_id']).toBe(taskId);
    }

    // Model calls as GenAI chat spans, for the lead (orchestrator) and a subagent (runner).
    for (const svc of ['baton-orchestrator', 'baton-sandbox-runner']) {
      const chat = spans.find((s) => s.service === svc && s.attributes['gen_ai.operation.name'] === 'chat');
      expect(chat, `a chat span in ${svc}`).toBeTruthy();
      expect(chat?.name).toBe('chat offline'); // the model that answered (no key: the offline one), as every series names it
      expect(chat?.kind).toBe(KIND.client);
      expect(chat?.attributes).toMatchObject({ 'gen_ai.request.model': expect.any(String), 'gen_ai.response.model': expect.any(String), 'gen_ai.usage.input_tokens': expect.any(Number), 'gen_ai.usage.output_tokens': expect.any(Number), 'baton.task_id': taskId });
    }
    // Tool calls: the researcher's tools run in the runner.
    expect(spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool' && s.service === 'baton-sandbox-runner').map((s) => s.attributes['gen_ai.tool.name'])).toContain('web_search');
    expect(has((s) => s.name === 'baton.sandbox.open')).toBe(true);

    // Each of the person's approvals joins the task's trace, linked to the request that carried it (its own trace).
    const commands = spans.filter((s) => s.name === 'baton.command');
    expect(commands).toHaveLength(approved);
    for (const command of commands) {
      expect(command.service).toBe('baton-gateway');
      const link = command.links[0];
      expect(link?.traceId).not.toBe(traceId);
      expect(otlp.spans.find((s) => s.spanId === link?.spanId)?.name).toBe('POST /v1/tasks/:id/approvals/:requestId');
    }
    // …and what an approval woke continues under it: a subagent it let the lead delegate to runs
    // under it. (Which approval that is depends on how the lead asked: one delegation per
    // approval, or several approved one after another, the last of which lets it go on.)
    const commandOf = (s: ReceivedSpan): ReceivedSpan | undefined => {
      for (let p = s.parentSpanId ? byId.get(s.parentSpanId) : undefined; p; p = p.parentSpanId ? byId.get(p.parentSpanId) : undefined) if (p.name === 'baton.command') return p;
      return undefined;
    };
    expect(spans.some((s) => s.service === 'baton-sandbox-runner' && commandOf(s) !== undefined)).toBe(true);
  });

  test('every service serves its metrics, and the workers their probes on the ops port', async () => {
    const names = busNames(stack.namespace);
    const text = async (url: string): Promise<string> => {
      const r = await fetch(url);
      expect(r.status, url).toBe(200);
      return r.text();
    };
    const gateway = await text(`${stack.url}/metrics`);
    expect(gateway).toMatch(/^baton_tasks\{status="completed"\} [1-9]/m);
    expect(gateway).toMatch(/^baton_http_requests_total\{method="POST",route="\/v1\/tasks",status="201"\} 1$/m);
    expect(gateway).toMatch(/^baton_append_duration_seconds_count [1-9]/m);
    expect(gateway).toMatch(/^process_cpu_seconds_total /m);

    const ops = async (svc: string): Promise<string> => `http://127.0.0.1:${(await requestDiagnostics(nc, names, svc)).opsPort}`;
    const orchestrator = await ops('orchestrator');
    const runner = await ops('sandbox-runner');
    const notifier = await ops('notifier');
    // The gateway tells how its SSE hub hears of transitions (sse-hub.ts).
    expect((await requestDiagnostics(nc, names, 'gateway')).sseHub).toEqual({ mode: 'all', watchedTasks: expect.any(Number) });
    for (const base of [orchestrator, runner, notifier]) {
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { started: 'ok', postgres: 'ok', nats: 'ok' } });
    }
    const o = await text(`${orchestrator}/metrics`);
    expect(o).toMatch(/^baton_model_turns_total\{team="research",model="offline[^"]*"\} [1-9]/m);
    // Spending shows from the first turn, at $0 with the offline model (a dashboard's cost panel reads 0, not "No data").
    expect(o).toMatch(/^baton_model_cost_usd_total\{team="research",model="offline[^"]*"\} 0$/m);
    // One name for the model that answered, in every series: not the configured Claude model in one and "offline" in another.
    for (const m of [o, await text(`${runner}/metrics`)]) {
      expect(m).toMatch(/^baton_model_call_duration_seconds_count\{model="offline",outcome="ok"\} [1-9]/m);
      expect(m).not.toMatch(/^baton_model_\w+\{[^}]*model="(?!offline")/m);
    }
    expect(o).toMatch(/^baton_step_duration_seconds_count\{runs_in="orchestrator",team="research"\} [1-9]/m);
    expect(o).toMatch(/^baton_relay_published_total [1-9]/m);
    expect(o).toMatch(/^baton_relay_leading 1$/m);
    expect(o).toMatch(/^baton_relay_leader 1$/m); // this orchestrator is the one leading
    expect(o).toMatch(/^baton_relay_lag_events \d+$/m);
    expect(o).toMatch(/^baton_consumer_pending_messages\{consumer="[^"]+"\} \d+$/m);
    expect(o).toMatch(/^baton_messages_handled_total\{consumer="[^"]+",outcome="ack"\} [1-9]/m);
    const r = await text(`${runner}/metrics`);
    expect(r).toMatch(/^baton_runner_jobs_total\{kind="run",outcome="completed"\} [1-9]/m);
    expect(r).toMatch(/^baton_model_tokens_total\{team="research",model="[^"]+",kind="input"\} [1-9]/m);
    expect(r).toMatch(/^baton_tool_calls_total\{tool="web_search",outcome="ok"\} [1-9]/m);
    expect(r).toMatch(/^baton_sandbox_duration_seconds_count\{provider="[^"]+",end="killed"\} [1-9]/m);
    expect(r).toMatch(/^baton_sandboxes_active\{provider="[^"]+"\} 0$/m);
    const n = await text(`${notifier}/metrics`);
    expect(n).toMatch(/^baton_deliveries_total\{channel="webhook",outcome="delivered"\} [1-9]/m);
    // Given up: a series from the start, at 0 (an alert on its increase sees the first one).
    expect(n).toMatch(/^baton_deliveries_total\{channel="email",outcome="failed"\} 0$/m);
    expect((await fetch(`${notifier}/nothing`)).status).toBe(404);
    // The relay's series only where a relay runs or its state is read: a runner's or notifier's constant 0 read as "no relay leads".
    expect(gateway).toMatch(/^baton_relay_leading 1$/m);
    for (const other of [r, n]) expect(other).not.toMatch(/^baton_relay_/m);
    // Scrapes and probes make no trace (at a 5 s scrape, a trace every 5 s per replica, about nothing).
    await fetch(`${stack.url}/readyz`);
    await fetch(`${stack.url}/healthz`);
    const requests = await text(`${stack.url}/metrics`);
    expect(requests).toMatch(/^baton_http_requests_total\{method="GET",route="\/metrics",status="200"\} [1-9]/m);
    expect(otlp.spans.filter((s) => s.service === 'baton-gateway' && /^GET \/(metrics|healthz|readyz)$/.test(s.name)).map((s) => s.name)).toEqual([]);
  });
  // The compose stack's Prometheus config and Grafana dashboard against a real Prometheus (Debian's;
  // .ci/run installs it): each job scrapes its service, and every query on the dashboard evaluates.
  test.skipIf(!hasPrometheus)('Prometheus, with the compose stack\'s jobs pointed at these processes, scrapes all four, and every dashboard query evaluates (the core panels with data)', async () => {
    const names = busNames(stack.namespace);
    const port = async (svc: string): Promise<number> => (await requestDiagnostics(nc, names, svc)).opsPort as number;
    const ports: Record<string, number> = { gateway: Number(new URL(stack.url).port), orchestrator: await port('orchestrator'), 'sandbox-runner': await port('sandbox-runner'), notifier: await port('notifier') };
    const config = parse(readFileSync(path.join(ROOT, 'infra/observability/prometheus.yml'), 'utf8')) as { global: Record<string, string>; scrape_configs: { job_name: string; dns_sd_configs?: unknown }[] };
    expect(config.scrape_configs.map((j) => j.job_name).sort()).toEqual([...SERVICES].sort());
    // Docker's DNS names become this test's loopback ports; everything else is the file's.
    config.global = { ...config.global, scrape_interval: '1s', evaluation_interval: '1s' };
    for (const job of config.scrape_configs) {
      delete job.dns_sd_configs;
      Object.assign(job, { static_configs: [{ targets: [`127.0.0.1:${ports[job.job_name]}`] }] });
    }
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-prometheus-'));
    writeFileSync(path.join(dir, 'prometheus.yml'), stringify(config));
    copyFileSync(path.join(ROOT, 'infra/observability/alerts.yml'), path.join(dir, 'alerts.yml')); // its rule_files
    const webPort = await freePort();
    const prometheus: ChildProcess = spawn('prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${webPort}`], { stdio: 'ignore' });
    try {
      const api = async <T>(p: string): Promise<{ status: string; data: T; error?: string }> => (await fetch(`http://127.0.0.1:${webPort}/api/v1/${p}`)).json() as Promise<{ status: string; data: T; error?: string }>;
      const query = (expr: string) => api<{ result: unknown[] }>(`query?query=${encodeURIComponent(expr.replaceAll('$__rate_interval', '1m'))}`);
      type Target = { labels: { job: string }; health: string; lastError: string };
      await waitFor(async () => (await api<{ activeTargets: Target[] }>('targets').catch(() => null))?.data.activeTargets.filter((t) => t.health === 'up').length === 4, { what: 'Prometheus scraping the four services', timeoutMs: 30_000 });
      // Two scrapes of every target, so rate() has points to work with.
      await waitFor(async () => ((await query('count(count_over_time(process_cpu_seconds_total[1m]) >= 3)').catch(() => null))?.data.result as { value: [number, string] }[] | undefined)?.[0]?.value[1] === '4', { what: 'three samples from each target', timeoutMs: 30_000 });

      // The alerts load, and none fires on this healthy stack (each one's trouble is tested by promtool: packages/k8s).
      const groups = (await api<{ groups: { rules: { name: string; health: string; state: string }[] }[] }>('rules')).data.groups.flatMap((g) => g.rules);
      expect(groups.length).toBeGreaterThan(0);
      expect(groups.filter((r) => r.health === 'err' || r.state === 'firing').map((r) => r.name)).toEqual([]);

      const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'infra/observability/grafana/dashboards/baton.json'), 'utf8')) as { panels: { type: string; title: string; targets?: { expr: string }[] }[] };
      const withData = new Set<string>();
      for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
        for (const { expr } of panel.targets ?? []) {
          const r = await query(expr);
          expect(r.error ?? r.status, `${panel.title}: ${expr}`).toBe('success');
          if (r.data.result.length > 0) withData.add(panel.title);
        }
      }
      // A research run with a webhook touches all of these (chat and mail stay empty, and cost: the offline model is free).
      const core = ['Tasks by status', 'Parked and stuck', 'Open requests', 'Step latency', 'Model turns', 'Model call latency', 'Tool calls', 'Tokens', 'Relay lag', 'Appends', 'Relay', 'Consumer pending', 'Messages handled', 'Sandboxes open', 'Sandbox lifetimes', 'Runner jobs', 'Deliveries', 'Requests', 'CPU', 'Memory', 'Event-loop lag'];
      expect(core.filter((t) => !withData.has(t))).toEqual([]);
    } finally {
      prometheus.kill('SIGTERM');
      await new Promise((r) => (prometheus.exitCode !== null ? r(null) : prometheus.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
