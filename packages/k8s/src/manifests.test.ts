import { mkdtempSync, readFileSync, readdirSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { busNames } from '@baton/bus';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { build, builtIn, idOf, readKustomization, readResources, type Rendered, type Resource } from './kustomize.ts';
import { schemaErrors, unknownFieldErrors } from './schemas.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const K8S = path.join(ROOT, 'infra/k8s');
const OVERLAYS = ['dev', 'production'] as const;
const rendered = Object.fromEntries(OVERLAYS.map((o) => [o, build(path.join(K8S, 'overlays', o))])) as Record<(typeof OVERLAYS)[number], Rendered[]>;
const base = build(path.join(K8S, 'base'));

// --- small accessors over plain objects --------------------------------------------------------
/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;
const find = (rs: Rendered[], kind: string, name: string): Any => {
  const r = rs.find((x) => x.resource.kind === kind && x.resource.metadata.name === name);
  if (!r) throw new Error(`${kind}/${name} is not rendered`);
  return r.resource;
};
const ofKind = (rs: Rendered[], kind: string): Any[] => rs.filter((x) => x.resource.kind === kind).map((x) => x.resource);
const podSpecOf = (r: Any): Any => r.spec.template.spec;
const containersOf = (r: Any): Any[] => [...(podSpecOf(r).initContainers ?? []), ...podSpecOf(r).containers];
const SERVICES = ['gateway', 'orchestrator', 'notifier', 'sandbox-runner'] as const;
const configOf = (rs: Rendered[]): Record<string, string> => find(rs, 'ConfigMap', 'baton-config').data;
const triggerOf = (rs: Rendered[]): Any => find(rs, 'ScaledObject', 'sandbox-runner').spec.triggers[0];

/** Everything wrong with a set of rendered resources against the schemas: `label: error` lines. */
function validate(resources: readonly { label: string; resource: Resource }[]): string[] {
  const problems = resources.flatMap(({ label, resource }) => schemaErrors(resource).map((e) => `${label}: ${e}`));
  for (const [label, errs] of unknownFieldErrors(resources)) problems.push(...errs.map((e) => `${label}: ${e}`));
  return problems;
}
const labelled = (rs: Rendered[]) => rs.map(({ resource, file }) => ({ label: `${path.relative(ROOT, file)} ${idOf(resource)}`, resource }));

describe('infra/k8s renders and validates against the Kubernetes and KEDA schemas', () => {
  test.each(OVERLAYS)('overlay %s: every resource is valid, with no field the schemas do not know', (overlay) => {
    expect(rendered[overlay].length).toBeGreaterThan(10);
    expect(validate(labelled(rendered[overlay]))).toEqual([]);
  });

  test('the base alone is valid too', () => {
    expect(validate(labelled(base))).toEqual([]);
  });

  test('every YAML file under infra/k8s is part of an overlay (nothing unchecked lies around)', () => {
    const used = new Set<string>();
    const walk = (dir: string): void => {
      used.add(path.join(dir, 'kustomization.yaml'));
      const k = readKustomization(dir);
      for (const r of k.resources ?? []) {
        const p = path.resolve(dir, r);
        if (p.endsWith('.yaml')) used.add(p);
        else walk(p);
      }
      for (const p of k.patches ?? []) used.add(path.resolve(dir, p.path));
    };
    for (const o of OVERLAYS) walk(path.join(K8S, 'overlays', o));
    const files = readdirSync(K8S, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml')).map((f) => path.join(K8S, f));
    expect(files.filter((f) => !used.has(f)).map((f) => path.relative(ROOT, f))).toEqual([]);
  });

  test('overlays only patch what the base has, and add no Baton workload of their own', () => {
    const baseIds = new Set(base.map((x) => `${x.resource.apiVersion} ${idOf(x.resource)}`));
    for (const o of OVERLAYS) {
      const dir = path.join(K8S, 'overlays', o);
      for (const p of readKustomization(dir).patches ?? []) {
        const [patch] = readResources(path.join(dir, p.path));
        expect(baseIds, `${o}/${p.path}`).toContain(`${patch!.apiVersion} ${idOf(patch!)}`);
      }
      const deployments = ofKind(rendered[o], 'Deployment').map((d) => d.metadata.name).sort();
      expect(deployments).toEqual([...SERVICES].sort());
    }
  });
});

describe('a broken manifest fails the checks', () => {
  const gateway = (): Resource => structuredClone(find(rendered.production, 'Deployment', 'gateway'));

  test('a misspelt field (livenesProbe) is reported, though the JSON schemas alone accept it', () => {
    const broken = gateway() as Any;
    const c = podSpecOf(broken).containers[0];
    c.livenesProbe = c.livenessProbe;
    delete c.livenessProbe;
    expect(schemaErrors(broken)).toEqual([]); // why the second check exists
    const problems = validate([{ label: 'broken gateway', resource: broken }]);
    expect(problems).toEqual([expect.stringMatching(/^broken gateway: .*'"?livenesProbe"?' does not exist in type/)]);
  });

  test('a wrong type, a bad enum value and a missing required field are reported by the JSON schema', () => {
    const broken = gateway() as Any;
    podSpecOf(broken).terminationGracePeriodSeconds = 'ninety';
    expect(schemaErrors(broken)).toEqual([expect.stringMatching(/terminationGracePeriodSeconds must be integer/)]);
    const noSelector = gateway() as Any;
    delete noSelector.spec.selector;
    expect(schemaErrors(noSelector).join()).toMatch(/must have required property selector/);
    const pdb = structuredClone(find(rendered.production, 'PodDisruptionBudget', 'gateway'));
    pdb.spec.unhealthyPodEvictionPolicy = 'Sometimes';
    expect(validate([{ label: 'pdb', resource: pdb }]).join()).toMatch(/unhealthyPodEvictionPolicy/);
  });

  test('a misspelt ScaledObject field is reported (KEDA schema)', () => {
    const so = structuredClone(find(rendered.production, 'ScaledObject', 'sandbox-runner'));
    so.spec.minReplicas = 0;
    expect(validate([{ label: 'so', resource: so }])).toEqual([expect.stringMatching(/'"?minReplicas"?' does not exist in type/)]);
  });

  test('a misspelt nats-jetstream trigger field is reported (the trigger check below)', () => {
    const t = structuredClone(triggerOf(rendered.production));
    t.metadata.lagTreshold = t.metadata.lagThreshold;
    delete t.metadata.lagThreshold;
    expect(natsJetStreamProblems(t.metadata)).toEqual(['unknown field lagTreshold', 'missing lagThreshold']);
  });

  test('a patch of a resource the base lacks, an unsupported kustomize feature and a resource without a schema are refused', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-k8s-'));
    cpSync(K8S, dir, { recursive: true });
    const prod = path.join(dir, 'overlays/production');
    writeFileSync(path.join(prod, 'notifier.patch.yaml'), 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: notifyer\nspec:\n  replicas: 2\n');
    expect(() => build(prod)).toThrow(/patches apps\/v1 Deployment\/notifyer, which .* does not have/);
    writeFileSync(path.join(prod, 'kustomization.yaml'), `${readFileSync(path.join(K8S, 'overlays/production/kustomization.yaml'), 'utf8')}commonLabels:\n  a: b\n`);
    expect(() => build(prod)).toThrow(/commonLabels not supported/);
    expect(schemaErrors({ apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', metadata: { name: 'x' } })).toEqual([expect.stringMatching(/no schema for networking.k8s.io\/v1 Ingress/)]);
  });
});

describe('the deployment matches the services', () => {
  const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8')) as { services: Record<string, { command?: string[] }> };

  test.each(OVERLAYS)('%s: each service runs the command docker-compose runs, as args (the image entrypoint, tini, stays PID 1)', (overlay) => {
    for (const name of SERVICES) {
      const [c] = podSpecOf(find(rendered[overlay], 'Deployment', name)).containers;
      expect(c.command, name).toBeUndefined();
      expect(c.args, name).toEqual(compose.services[name]!.command);
    }
    const [migrate] = podSpecOf(find(rendered[overlay], 'Job', 'baton-migrate')).containers;
    expect(migrate.command).toBeUndefined();
    expect(migrate.args).toEqual(compose.services.migrate!.command);
    expect(readFileSync(path.join(ROOT, 'infra/docker/Dockerfile'), 'utf8')).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--"\]$/m);
  });

  test.each(OVERLAYS)('%s: every Baton pod waits for the migrations first; every image is the release image, with a tag', (overlay) => {
    const rs = rendered[overlay];
    const script = find(rs, 'ConfigMap', 'baton-wait-for-migrations').data['wait-for-migrations.cjs'];
    expect(script).toContain('kysely_migration');
    const images = new Set<string>();
    for (const name of SERVICES) {
      const spec = podSpecOf(find(rs, 'Deployment', name));
      const [init] = spec.initContainers;
      expect(init.name).toBe('wait-for-migrations');
      expect(init.args).toEqual(['node', '/etc/baton/wait-for-migrations.cjs']);
      const mount = init.volumeMounts.find((m: Any) => m.mountPath === '/etc/baton');
      expect(spec.volumes.find((v: Any) => v.name === mount.name).configMap.name).toBe('baton-wait-for-migrations');
      for (const c of containersOf(find(rs, 'Deployment', name))) images.add(c.image);
    }
    for (const c of containersOf(find(rs, 'Job', 'baton-migrate'))) images.add(c.image);
    expect(images.size).toBe(1);
    expect([...images][0]).toMatch(/^[\w./-]+:[\w.-]+$/);
  });

  test.each(OVERLAYS)('%s: the gateway is probed on /healthz (liveness) and /readyz (readiness), on the port its Service targets', (overlay) => {
    const rs = rendered[overlay];
    const [c] = podSpecOf(find(rs, 'Deployment', 'gateway')).containers;
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8080 }]);
    expect(c.env).toContainEqual({ name: 'PORT', value: '8080' });
    expect(c.env).toContainEqual({ name: 'HOST', value: '0.0.0.0' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    const svc = find(rs, 'Service', 'gateway');
    expect(svc.spec.ports[0].targetPort).toBe('http');
    expect(svc.spec.selector).toEqual(find(rs, 'Deployment', 'gateway').spec.template.metadata.labels);
    const routes = readFileSync(path.join(ROOT, 'services/gateway/src/routes/system.ts'), 'utf8');
    expect(routes).toContain("app.get('/healthz'");
    expect(routes).toContain("app.get('/readyz'");
  });

  test.each(OVERLAYS)('%s: the workers are probed on their ops port (the OPS_PORT their config defaults to, on every interface), and every pod asks Prometheus to scrape its /metrics', (overlay) => {
    const rs = rendered[overlay];
    for (const name of ['orchestrator', 'sandbox-runner', 'notifier'] as const) {
      const configTs = readFileSync(path.join(ROOT, `services/${name}/src/config.ts`), 'utf8');
      const defaultPort = Number(/opsEnv\((\d+)\)/.exec(configTs)?.[1]);
      expect(defaultPort, `${name}: opsEnv(<port>) in config.ts`).toBeGreaterThan(0);
      const [c] = podSpecOf(find(rs, 'Deployment', name)).containers;
      expect(c.ports, name).toEqual([{ name: 'ops', containerPort: defaultPort }]);
      expect(c.env).toContainEqual({ name: 'OPS_PORT', value: String(defaultPort) });
      expect(c.env).toContainEqual({ name: 'OPS_HOST', value: '0.0.0.0' });
      expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'ops' });
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'ops' });
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'ops' });
      expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold, `${name}: time to first reach Postgres and NATS`).toBeGreaterThanOrEqual(300);
    }
    for (const name of SERVICES) {
      const d = find(rs, 'Deployment', name);
      const [c] = podSpecOf(d).containers;
      const annotations = d.spec.template.metadata.annotations ?? {};
      expect(annotations['prometheus.io/scrape'], name).toBe('true');
      expect(annotations['prometheus.io/path'], name).toBe('/metrics');
      expect(c.ports.map((p: Any) => String(p.containerPort)), name).toContain(annotations['prometheus.io/port']);
    }
    const ops = readFileSync(path.join(ROOT, 'packages/telemetry/src/ops-server.ts'), 'utf8');
    for (const p of ["'/healthz'", "'/readyz'", "'/metrics'"]) expect(ops).toContain(p);
    expect(readFileSync(path.join(ROOT, 'services/gateway/src/routes/system.ts'), 'utf8')).toContain("'/metrics'");
  });

  test.each(OVERLAYS)('%s: each grace period outlasts the service\'s shutdown (its steps x the 20 s bound each, plus preStop)', (overlay) => {
    const bound = Number(/timeoutMs = ([\d_]+)\)/.exec(readFileSync(path.join(ROOT, 'packages/runtime/src/shutdown.ts'), 'utf8'))![1]!.replaceAll('_', '')) / 1000;
    expect(bound).toBe(20);
    for (const name of SERVICES) {
      const main = readFileSync(path.join(ROOT, `services/${name}/src/main.ts`), 'utf8');
      const block = /installShutdown\(log, \[([\s\S]*?)\n\]\);/.exec(main);
      expect(block, `${name}: installShutdown(log, [...]) in main.ts`).not.toBeNull();
      const steps = (block![1]!.match(/\{ name: /g) ?? []).length;
      expect(steps, name).toBeGreaterThanOrEqual(3);
      const spec = podSpecOf(find(rendered[overlay], 'Deployment', name));
      const preStop = Number(spec.containers[0].lifecycle?.preStop?.exec?.command?.[1] ?? 0);
      expect(spec.terminationGracePeriodSeconds, name).toBeGreaterThan(preStop + steps * bound);
    }
  });

  test.each(OVERLAYS)('%s: a PodDisruptionBudget covers each Deployment; every container has requests and a memory limit', (overlay) => {
    const rs = rendered[overlay];
    for (const name of SERVICES) {
      const d = find(rs, 'Deployment', name);
      const pdb = find(rs, 'PodDisruptionBudget', name);
      expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
      expect(d.spec.template.metadata.labels).toMatchObject(d.spec.selector.matchLabels);
      expect(pdb.spec.maxUnavailable).toBe(1);
    }
    for (const w of [...ofKind(rs, 'Deployment'), ...ofKind(rs, 'StatefulSet'), ...ofKind(rs, 'Job')]) {
      for (const c of containersOf(w)) {
        expect(c.resources?.requests?.cpu, `${w.metadata.name}/${c.name}`).toBeDefined();
        expect(c.resources?.requests?.memory, `${w.metadata.name}/${c.name}`).toBeDefined();
        expect(c.resources?.limits?.memory, `${w.metadata.name}/${c.name}`).toBeDefined();
      }
    }
  });
});

describe('security', () => {
  const dockerUser = /^USER node$/m.test(readFileSync(path.join(ROOT, 'infra/docker/Dockerfile'), 'utf8'));

  test('production: every pod meets the restricted Pod Security Standard, with a read-only root file system', () => {
    expect(dockerUser).toBe(true); // uid 1000 in node images: runAsUser says so, since the kubelet cannot check a user name
    const ns = find(rendered.production, 'Namespace', 'baton');
    expect(ns.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    for (const w of [...ofKind(rendered.production, 'Deployment'), ...ofKind(rendered.production, 'Job')]) {
      const spec = podSpecOf(w);
      expect(spec.securityContext, w.metadata.name).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
      expect(spec.hostNetwork ?? spec.hostPID ?? spec.hostIPC).toBeUndefined();
      expect(spec.automountServiceAccountToken).toBe(false);
      for (const c of containersOf(w)) {
        expect(c.securityContext, `${w.metadata.name}/${c.name}`).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      }
      for (const v of spec.volumes ?? []) expect(Object.keys(v).filter((k) => k !== 'name'), `${w.metadata.name} volume ${v.name}`).toEqual([expect.stringMatching(/^(emptyDir|configMap|secret|projected)$/)]);
    }
    expect(configOf(rendered.production).SANDBOX_PROVIDER).toBe('e2b');
  });

  test('dev: only the runner is granted what bubblewrap needs (its own user namespace, unmasked /proc, no seccomp or AppArmor profile)', () => {
    for (const d of ofKind(rendered.dev, 'Deployment')) {
      const spec = podSpecOf(d);
      const [c] = spec.containers;
      if (d.metadata.name === 'sandbox-runner') {
        expect(spec.hostUsers).toBe(false);
        expect(c.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
          procMount: 'Unmasked',
          seccompProfile: { type: 'Unconfined' },
          appArmorProfile: { type: 'Unconfined' },
        });
        expect(c.securityContext.privileged).toBeUndefined();
      } else {
        expect(spec.hostUsers).toBeUndefined();
        expect(c.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      }
    }
    expect(configOf(rendered.dev).SANDBOX_PROVIDER).toBe('local');
    expect(readFileSync(path.join(ROOT, 'infra/docker/Dockerfile'), 'utf8')).toMatch(/apt-get install[^\n]*bubblewrap/);
  });

  test('secrets: every reference is to baton-secrets; production holds no Secret; the keys are documented; dev has no empty value', () => {
    const docs = readFileSync(path.join(ROOT, 'docs/kubernetes.md'), 'utf8');
    for (const o of OVERLAYS) {
      for (const w of [...ofKind(rendered[o], 'Deployment'), ...ofKind(rendered[o], 'Job')]) {
        for (const c of containersOf(w)) {
          for (const e of c.env ?? []) {
            const ref = e.valueFrom?.secretKeyRef;
            if (!ref) continue;
            expect(ref.name, `${w.metadata.name}/${c.name} ${e.name}`).toBe('baton-secrets');
            expect(ref.key).toBe(e.name);
            expect(docs, `docs/kubernetes.md names ${ref.key}`).toContain(`\`${ref.key}\``);
          }
          for (const f of c.envFrom ?? []) expect(f).toEqual({ configMapRef: { name: 'baton-config' } });
        }
      }
    }
    expect(ofKind(rendered.production, 'Secret')).toEqual([]);
    const required = (o: 'dev' | 'production', deployment: string, key: string): boolean =>
      !podSpecOf(find(rendered[o], 'Deployment', deployment)).containers[0].env.find((e: Any) => e.name === key).valueFrom.secretKeyRef.optional;
    expect(required('production', 'gateway', 'BATON_API_KEYS')).toBe(true);
    expect(required('production', 'notifier', 'WEBHOOK_SECRET')).toBe(true);
    expect(required('production', 'sandbox-runner', 'E2B_API_KEY')).toBe(true);
    expect(required('dev', 'gateway', 'BATON_API_KEYS')).toBe(false);
    const devSecret = find(rendered.dev, 'Secret', 'baton-secrets');
    expect(Object.keys(devSecret.stringData)).toEqual(['DATABASE_URL']);
    for (const v of Object.values(devSecret.stringData)) expect(v).not.toBe('');
  });
});

/**
 * The nats-jetstream trigger's metadata, as KEDA reads it (keda.sh/docs/2.17/scalers/nats-jetstream;
 * kedacore/keda pkg/scalers/nats_jetstream_scaler.go, parseNATSJetStreamMetadata): the CRD's
 * schema types `metadata` as a map of strings, so field names are checked here.
 */
const NATS_JETSTREAM_FIELDS: Record<string, { required: boolean; pattern: RegExp }> = {
  natsServerMonitoringEndpoint: { required: true, pattern: /^[a-z0-9-]+(\.[a-z0-9-]+)+:\d+$/ },
  account: { required: true, pattern: /^.+$/ },
  stream: { required: true, pattern: /^[A-Za-z0-9_-]+$/ },
  consumer: { required: true, pattern: /^[A-Za-z0-9_-]+$/ },
  lagThreshold: { required: true, pattern: /^[1-9]\d*$/ },
  activationLagThreshold: { required: false, pattern: /^\d+$/ },
  useHttps: { required: false, pattern: /^(true|false)$/ },
};
function natsJetStreamProblems(metadata: Record<string, string>): string[] {
  const problems = Object.keys(metadata).filter((k) => !(k in NATS_JETSTREAM_FIELDS)).map((k) => `unknown field ${k}`);
  for (const [k, f] of Object.entries(NATS_JETSTREAM_FIELDS)) {
    if (metadata[k] === undefined) {
      if (f.required) problems.push(`missing ${k}`);
    } else if (!f.pattern.test(metadata[k])) problems.push(`${k}: '${metadata[k]}' does not match ${f.pattern}`);
  }
  return problems;
}

describe('runners scale on the jobs consumer (KEDA nats-jetstream)', () => {
  test.each(OVERLAYS)('%s: the ScaledObject scales the runner Deployment from zero on the runner-jobs consumer of the jobs stream', (overlay) => {
    const rs = rendered[overlay];
    const so = find(rs, 'ScaledObject', 'sandbox-runner');
    const runner = find(rs, 'Deployment', 'sandbox-runner');
    expect(so.spec.scaleTargetRef).toEqual({ name: runner.metadata.name });
    expect(runner.spec.replicas).toBeUndefined(); // KEDA owns it
    expect(so.spec.minReplicaCount).toBe(0);
    expect(so.spec.maxReplicaCount).toBeGreaterThan(0);
    expect(so.spec.triggers).toHaveLength(1);
    const t = triggerOf(rs);
    expect(t.type).toBe('nats-jetstream');
    expect(natsJetStreamProblems(t.metadata)).toEqual([]);
    const config = configOf(rs);
    const names = busNames(config.BATON_NAMESPACE);
    expect(t.metadata.stream).toBe(names.jobsStream);
    expect(t.metadata.consumer).toBe(names.consumers.runner);
    expect(t.metadata.lagThreshold).toBe(config.RUNNER_CONCURRENCY);
    expect(t.metadata.account).toBe('$G');
    // KEDA asks from its own namespace: the host names the Service's namespace; the port is NATS's monitoring port.
    const [host, port] = t.metadata.natsServerMonitoringEndpoint.split(':');
    expect(port).toBe('8222');
    expect(host.split('.').length).toBeGreaterThanOrEqual(2);
    // Every service must be able to reach the NATS whose monitoring endpoint is read: same host.
    expect(new URL(config.NATS_URL!).hostname.split('.')[0]).toBe(host.split('.')[0]);
  });

  test('dev: the endpoint is this overlay\'s NATS Service, which serves port 8222 as infra/nats/nats.conf configures it', () => {
    const t = triggerOf(rendered.dev);
    const svc = find(rendered.dev, 'Service', 'nats');
    expect(t.metadata.natsServerMonitoringEndpoint).toBe(`nats.${svc.metadata.namespace}.svc.cluster.local:8222`);
    expect(svc.spec.ports).toContainEqual({ name: 'monitor', port: 8222, targetPort: 'monitor' });
    expect(configOf(rendered.dev).NATS_URL).toBe('nats://nats:4222');
    const conf = find(rendered.dev, 'ConfigMap', 'nats-config').data['nats.conf'];
    expect(conf).toBe(readFileSync(path.join(ROOT, 'infra/nats/nats.conf'), 'utf8'));
    expect(conf).toMatch(/^http_port: 8222$/m);
    const [c] = podSpecOf(find(rendered.dev, 'StatefulSet', 'nats')).containers;
    expect(c.ports).toContainEqual({ name: 'monitor', containerPort: 8222 });
  });

  test('a namespaced deployment (BATON_NAMESPACE) would need the namespaced stream name: the check would catch a mismatch', () => {
    expect(busNames('prod').jobsStream).toBe('BATON_JOBS_PROD');
    expect(busNames('prod').consumers.runner).toBe('runner-jobs');
  });

  test('custom resources are patched as JSON merge patches (a list is replaced whole), built-in ones by merge keys', () => {
    expect(builtIn('keda.sh/v1alpha1')).toBe(false);
    expect(builtIn('apps/v1')).toBe(true);
    expect(builtIn('v1')).toBe(true);
    expect(builtIn('networking.k8s.io/v1')).toBe(true);
  });
});
