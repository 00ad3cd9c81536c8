import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { METRIC_NAMES, registry, startMetrics } from '@baton/telemetry';
import { describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';

/*
 * The compose stack's `observability` profile (docs/observability.md) checked offline: the compose
 * file wires it, Prometheus scrapes the port each service really serves /metrics on, the collector's
 * pipeline ends in Jaeger, Grafana's data sources point at the stack's services, and the dashboard
 * asks only for series Baton defines (and shows every one of them).
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const OBS = path.join(ROOT, 'infra/observability');
/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;
const yamlAt = (file: string): Any => parse(readFileSync(file, 'utf8'), { merge: true });
const compose = yamlAt(path.join(ROOT, 'docker-compose.yml'));
const SERVICES = ['gateway', 'orchestrator', 'sandbox-runner', 'notifier'] as const;
const STACK = ['otel-collector', 'jaeger', 'prometheus', 'grafana'] as const;

/** The port each service serves GET /metrics on: the gateway's HTTP port, the workers' ops port. */
function metricsPort(name: (typeof SERVICES)[number]): number {
  if (name === 'gateway') return Number(compose.services.gateway.environment.PORT);
  const port = Number(/opsEnv\((\d+)\)/.exec(readFileSync(path.join(ROOT, `services/${name}/src/config.ts`), 'utf8'))?.[1]);
  if (!(port > 0)) throw new Error(`services/${name}/src/config.ts: no opsEnv(<port>)`);
  return port;
}

/** A compose service's bind mounts: host path (resolved) → container path. */
function mounts(service: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of compose.services[service].volumes ?? []) {
    const [host, target] = String(v).split(':') as [string, string];
    if (host.startsWith('./')) out.set(path.resolve(ROOT, host), target);
  }
  return out;
}

/** `host:port` → the compose service and the port, if the host is one. */
const serviceAt = (hostPort: string): { service: string; port: number } | null => {
  const m = /^(?:https?:\/\/)?([a-z0-9-]+):(\d+)\/?$/.exec(hostPort);
  return m && compose.services[m[1]!] ? { service: m[1]!, port: Number(m[2]) } : null;
};

/** Series the dashboard may ask for: Baton's own and prom-client's process and Node.js ones. */
async function knownSeries(): Promise<Set<string>> {
  startMetrics();
  const defaults = (await registry.getMetricsAsJSON()).map((m) => m.name);
  return new Set([...METRIC_NAMES, ...defaults]);
}

/** Everything wrong with a Grafana dashboard: unknown series, unknown data sources, overlapping panels, duplicate ids. */
function dashboardProblems(d: Any, known: ReadonlySet<string>, datasources: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const ids = new Set<number>();
  const placed: Any[] = [];
  for (const p of d.panels ?? []) {
    if (ids.has(p.id)) problems.push(`panel id ${p.id} is used twice`);
    ids.add(p.id);
    const { x, y, w, h } = p.gridPos ?? {};
    if (![x, y, w, h].every(Number.isInteger) || x + w > 24) problems.push(`${p.title}: gridPos ${JSON.stringify(p.gridPos)} is not on the 24-column grid`);
    for (const q of placed) {
      const o = q.gridPos;
      if (x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h) problems.push(`${p.title} overlaps ${q.title}`);
    }
    placed.push(p);
    if (p.type === 'row') continue;
    for (const t of [p, ...(p.targets ?? [])])
      if (t.datasource && !datasources.has(t.datasource.uid)) problems.push(`${p.title}: data source ${t.datasource.uid} is not provisioned`);
    if (!p.targets?.length) problems.push(`${p.title}: no query`);
    for (const t of p.targets ?? [])
      for (const name of seriesIn(t.expr)) if (!known.has(name)) problems.push(`${p.title}: ${name} is not a series Baton exports`);
  }
  return problems;
}

/** The series a PromQL expression reads (histogram suffixes stripped). */
function seriesIn(expr: string): string[] {
  const names = (expr.match(/\b(?:baton|process|nodejs)_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|count|sum)$/, ''));
  return [...new Set(names)];
}

describe('docker-compose.yml: the observability profile', () => {
  test('the Baton services export traces when OTEL_EXPORTER_OTLP_ENDPOINT is given and serve their ops port on every interface', () => {
    for (const name of SERVICES) {
      const env = compose.services[name].environment;
      expect(env.OPS_HOST, name).toBe('0.0.0.0');
      expect(env.OTEL_EXPORTER_OTLP_ENDPOINT, name).toBe('${OTEL_EXPORTER_OTLP_ENDPOINT:-}');
      expect(compose.services[name].profiles, `${name} runs without the profile`).toBeUndefined();
    }
    // The command the file's header (and the docs) give points the services at the collector's OTLP/HTTP port.
    const header = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    const endpoint = /OTEL_EXPORTER_OTLP_ENDPOINT=(\S+) docker compose --profile observability up/.exec(header)?.[1];
    expect(serviceAt(endpoint ?? '')).toEqual({ service: 'otel-collector', port: 4318 });
  });

  test('the collector, Jaeger, Prometheus and Grafana run only in the profile, with pinned images and every mounted file present', () => {
    for (const name of STACK) {
      const s = compose.services[name];
      expect(s.profiles, name).toEqual(['observability']);
      expect(s.image, name).toMatch(/:v?\d+\.\d+\.\d+$/);
      for (const host of mounts(name).keys()) expect(existsSync(host), `${name} mounts ${host}`).toBe(true);
    }
  });

  test('every file under infra/observability is mounted into the stack (nothing lies around unused)', () => {
    const mounted = STACK.flatMap((s) => [...mounts(s).keys()]);
    const walk = (dir: string): string[] => readdirSync(dir).flatMap((f) => (statSync(path.join(dir, f)).isDirectory() ? walk(path.join(dir, f)) : [path.join(dir, f)]));
    for (const file of walk(OBS).filter((f) => !f.endsWith('README.md')))
      expect(mounted.some((m) => file === m || file.startsWith(m + path.sep)), path.relative(ROOT, file)).toBe(true);
  });

  test('Prometheus scrapes each service on the port it serves /metrics on, every replica by Docker DNS', () => {
    const prom = yamlAt(path.join(OBS, 'prometheus.yml'));
    expect(mounts('prometheus').get(path.join(OBS, 'prometheus.yml'))).toBe(compose.services.prometheus.command.find((c: string) => c.startsWith('--config.file='))?.split('=')[1]);
    const jobs = new Map<string, Any>(prom.scrape_configs.map((j: Any) => [j.job_name, j]));
    expect([...jobs.keys()].sort()).toEqual([...SERVICES].sort());
    for (const name of SERVICES) {
      const sd = jobs.get(name).dns_sd_configs;
      expect(sd, name).toEqual([expect.objectContaining({ names: [name], type: 'A', port: metricsPort(name) })]);
      expect(jobs.get(name).metrics_path ?? '/metrics').toBe('/metrics');
    }
  });

  test('the collector receives OTLP on the stack network and sends every span on to Jaeger', () => {
    const col = yamlAt(path.join(OBS, 'collector.yaml'));
    expect(mounts('otel-collector').get(path.join(OBS, 'collector.yaml'))).toBe(compose.services['otel-collector'].command[0].split('=')[1]);
    expect(col.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    const { traces } = col.service.pipelines;
    expect(traces.receivers).toEqual(['otlp']);
    for (const p of traces.processors) expect(col.processors, p).toHaveProperty([p]);
    expect(traces.exporters.length).toBeGreaterThan(0);
    for (const e of traces.exporters) {
      expect(e).toMatch(/^otlp(\/|$)/);
      expect(serviceAt(col.exporters[e].endpoint), e).toEqual({ service: 'jaeger', port: 4317 });
    }
    expect(compose.services.jaeger.environment.JAEGER_LISTEN_HOST).toBe('0.0.0.0');
  });

  test('Grafana provisions Prometheus and Jaeger at their stack addresses and loads the dashboard from where it is mounted', () => {
    const g = mounts('grafana');
    const provisioning = g.get(path.join(OBS, 'grafana/provisioning'));
    expect(provisioning).toBe('/etc/grafana/provisioning');
    const { datasources } = yamlAt(path.join(OBS, 'grafana/provisioning/datasources/baton.yaml'));
    expect(datasources.map((d: Any) => [d.type, serviceAt(d.url)])).toEqual([
      ['prometheus', { service: 'prometheus', port: 9090 }],
      ['jaeger', { service: 'jaeger', port: 16686 }],
    ]);
    const { providers } = yamlAt(path.join(OBS, 'grafana/provisioning/dashboards/baton.yaml'));
    expect(providers.map((p: Any) => p.options.path)).toEqual([g.get(path.join(OBS, 'grafana/dashboards'))]);
    expect(compose.services.grafana.environment.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(`${providers[0].options.path}/baton.json`);
  });
});

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync(path.join(OBS, 'grafana/dashboards/baton.json'), 'utf8'));
  const datasources = new Set<string>(yamlAt(path.join(OBS, 'grafana/provisioning/datasources/baton.yaml')).datasources.map((d: Any) => d.uid));

  test('asks only for series Baton exports, from provisioned data sources, on a grid with no overlap', async () => {
    expect(dashboardProblems(dashboard, await knownSeries(), datasources)).toEqual([]);
  });

  test('shows every series Baton defines', () => {
    const shown = new Set(dashboard.panels.flatMap((p: Any) => (p.targets ?? []).flatMap((t: Any) => seriesIn(t.expr))));
    expect(METRIC_NAMES.filter((n) => !shown.has(n))).toEqual([]);
  });

  test('a broken copy is caught: a misspelt series, an unknown data source, overlapping panels', async () => {
    const broken = structuredClone(dashboard);
    const [a, b] = broken.panels.filter((p: Any) => p.type !== 'row');
    a.targets[0].expr = 'sum(rate(baton_model_tokenz_total[5m]))';
    b.targets[0].datasource = { type: 'prometheus', uid: 'elsewhere' };
    b.gridPos = { ...a.gridPos };
    expect(dashboardProblems(broken, await knownSeries(), datasources)).toEqual([
      `${a.title}: baton_model_tokenz_total is not a series Baton exports`,
      `${b.title} overlaps ${a.title}`,
      `${b.title}: data source elsewhere is not provisioned`,
    ]);
  });
});

// promtool (Debian's prometheus package; .ci/run installs it) checks the config as Prometheus would load it.
const hasPromtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
test.skipIf(!hasPromtool)('promtool: infra/observability/prometheus.yml is a valid Prometheus config', () => {
  const r = spawnSync('promtool', ['check', 'config', path.join(OBS, 'prometheus.yml')], { encoding: 'utf8' });
  expect(r.stdout + r.stderr).toContain('SUCCESS');
  expect(r.status).toBe(0);
});

// Each alert fires on what it is for and not on a healthy deployment: promtool's own unit tests of the rules.
test.skipIf(!hasPromtool)("promtool: every alert in infra/observability/alerts.yml fires on what it is for, and none on a healthy deployment", () => {
  const rules = yamlAt(path.join(OBS, 'alerts.yml')) as { groups: { name: string; rules: Any[] }[] };
  const alerts = rules.groups.flatMap((g) => g.rules.map((r: { alert: string }) => r.alert));
  // Series over 20 minutes, one sample a minute: each alert's trouble, and a healthy deployment beside it.
  const series = [
    { series: 'up{job="notifier",instance="n:9466"}', values: '1 1 0x18' },
    { series: 'up{job="gateway",instance="g:8080"}', values: '1x20' },
    { series: 'baton_relay_lag_seconds{job="gateway",instance="g:8080"}', values: '0 0 0 0 0 120 180 240 300 360 420 480 540 600 660 720 780 840 900 960 1020' },
    { series: 'baton_relay_leading{job="gateway",instance="g:8080"}', values: '1x10 0x10' },
    { series: 'baton_stuck_tasks{job="gateway",instance="g:8080"}', values: '0x5 2x15' },
    // (Unix seconds: the test's clock starts at 0.) One consumer's last dead letter at 1 min, the other's again at 30 min.
    { series: 'baton_dead_letter_last_timestamp_seconds{job="gateway",instance="g:8080",consumer="runner-jobs"}', values: '60x40' },
    { series: 'baton_dead_letter_last_timestamp_seconds{job="gateway",instance="g:8080",consumer="notifier-events"}', values: '60x29 1800x11' },
    { series: 'baton_deliveries_total{job="notifier",instance="n:9466",channel="webhook",outcome="failed"}', values: '0x10 1 2x9' },
    { series: 'baton_deliveries_total{job="notifier",instance="n:9466",channel="webhook",outcome="retried"}', values: '0+5x20' },
    { series: 'baton_consumer_pending_messages{job="orchestrator",instance="o:9464",consumer="runner-jobs"}', values: '5000x20' },
    { series: 'baton_consumer_pending_messages{job="orchestrator",instance="o:9464",consumer="notifier-events"}', values: '10x20' },
  ];
  const firing = (alertname: string, at: string, labels: Record<string, string>[]) => ({ eval_time: at, alertname, exp_alerts: labels.map((l) => ({ exp_labels: l })) });
  const dir = mkdtempSync(path.join(tmpdir(), 'baton-alerts-'));
  // The rules as they are, without their annotations (promtool would compare the texts too; their templates are checked by check rules).
  const bare = { groups: rules.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }: Any) => r) })) };
  writeFileSync(path.join(dir, 'alerts.yml'), stringify(bare));
  const tests = {
    rule_files: [path.join(dir, 'alerts.yml')],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: series,
        alert_rule_test: [
          firing('BatonServiceDown', '1m', []),
          firing('BatonServiceDown', '5m', [{ severity: 'critical', job: 'notifier', instance: 'n:9466' }]),
          firing('BatonRelayBehind', '5m', []),
          firing('BatonRelayBehind', '9m', [{ severity: 'critical' }]),
          firing('BatonNoRelayLeading', '11m', []),
          firing('BatonNoRelayLeading', '13m', [{ severity: 'critical' }]),
          firing('BatonStuckTasks', '10m', []),
          firing('BatonStuckTasks', '16m', [{ severity: 'warning' }]),
          firing('BatonDeadLetter', '20m', []),
          firing('BatonDeadLetter', '31m', [{ severity: 'warning', consumer: 'notifier-events' }]),
          firing('BatonDeliveriesGivenUp', '9m', []),
          firing('BatonDeliveriesGivenUp', '12m', [{ severity: 'warning', channel: 'webhook' }]),
          firing('BatonConsumerBacklog', '5m', []),
          firing('BatonConsumerBacklog', '15m', [{ severity: 'warning', consumer: 'runner-jobs' }]),
        ],
      },
    ],
  };
  expect(new Set(tests.tests[0]!.alert_rule_test.map((t) => t.alertname))).toEqual(new Set(alerts));
  try {
    expect(spawnSync('promtool', ['check', 'rules', path.join(OBS, 'alerts.yml')], { encoding: 'utf8' }).status).toBe(0);
    const file = path.join(dir, 'alerts.test.yml');
    writeFileSync(file, stringify(tests));
    const r = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// docker-compose validates the whole file offline (profiles, merges, interpolation); .ci/run installs it.
const composeCli = ['docker-compose', 'docker'].find((c) => spawnSync(c, c === 'docker' ? ['compose', 'version'] : ['version'], { stdio: 'ignore' }).status === 0);
describe.skipIf(!composeCli)(`${composeCli ?? 'docker-compose (not installed)'}: config`, () => {
  test('the file, with the observability profile, is valid', () => {
    const args = [...(composeCli === 'docker' ? ['compose'] : []), '-f', 'docker-compose.yml', '--profile', 'observability', 'config', '--services'];
    const r = spawnSync(composeCli!, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, MAIL_LINK_SECRET: 'x'.repeat(40) } });
    expect(r.stderr.split('\n').filter((l) => /error|invalid|unsupported/i.test(l))).toEqual([]);
    expect(r.status).toBe(0);
    expect(r.stdout.split('\n').filter(Boolean).sort()).toEqual([...SERVICES, ...STACK, 'mailpit', 'migrate', 'nats', 'postgres'].sort());
  });
});
