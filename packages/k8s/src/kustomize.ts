import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Just enough of `kustomize build` to render infra/k8s offline (no kustomize binary is on the
 * development machines): `resources` (files and directories), `patches` given by `path`
 * (strategic merge, with the merge keys of the fields Baton's manifests patch), `images` and
 * `namespace`. A kustomization using anything else is refused, so the manifests cannot drift
 * into what this renderer would silently get wrong; kustomize itself renders them the same.
 */
export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

/** A rendered resource and the file it came from. */
export interface Rendered {
  resource: Resource;
  file: string;
}

const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'patches', 'images']);
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PersistentVolume', 'StorageClass', 'PriorityClass']);
const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob']);

interface Kustomization {
  namespace?: string;
  resources?: string[];
  patches?: { path: string }[];
  images?: { name: string; newName?: string; newTag?: string }[];
}

export const idOf = (r: Resource): string => `${r.kind}/${r.metadata.name}`;

/** Every YAML document of a file, each checked to look like a Kubernetes object. */
export function readResources(file: string): Resource[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  return docs.map((d, i) => {
    if (d.errors.length > 0) throw new Error(`${file}: document ${i + 1}: ${d.errors.map((e) => e.message).join('; ')}`);
    const r = d.toJS() as Resource;
    if (!r || typeof r !== 'object' || typeof r.apiVersion !== 'string' || typeof r.kind !== 'string' || typeof r.metadata?.name !== 'string') {
      throw new Error(`${file}: document ${i + 1} is not a Kubernetes object (apiVersion, kind and metadata.name)`);
    }
    return r;
  });
}

export function readKustomization(dir: string): Kustomization {
  const file = path.join(dir, 'kustomization.yaml');
  const [doc, ...more] = parseAllDocuments(readFileSync(file, 'utf8'));
  if (!doc || more.length > 0 || doc.errors.length > 0) throw new Error(`${file}: one YAML document expected`);
  const k = doc.toJS() as Record<string, unknown>;
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization') throw new Error(`${file}: not a kustomize.config.k8s.io/v1beta1 Kustomization`);
  const unknown = Object.keys(k).filter((key) => !KUSTOMIZATION_KEYS.has(key));
  if (unknown.length > 0) throw new Error(`${file}: ${unknown.join(', ')} not supported by this renderer (it knows ${[...KUSTOMIZATION_KEYS].join(', ')})`);
  for (const p of (k.patches ?? []) as Record<string, unknown>[]) {
    if (Object.keys(p).join() !== 'path') throw new Error(`${file}: a patch must be { path } (a strategic-merge patch file)`);
  }
  return k as Kustomization;
}

/** `kustomize build dir`, for the features above. Resources keep the file they came from. */
export function build(dir: string): Rendered[] {
  const k = readKustomization(dir);
  let out: Rendered[] = [];
  for (const entry of k.resources ?? []) {
    const p = path.resolve(dir, entry);
    if (statSync(p).isDirectory()) out.push(...build(p));
    else {
      if (path.relative(dir, p).startsWith('..')) throw new Error(`${dir}: resource file ${entry} is outside the kustomization (kustomize refuses it)`);
      out.push(...readResources(p).map((resource) => ({ resource, file: p })));
    }
  }
  const seen = new Set<string>();
  for (const { resource, file } of out) {
    if (seen.has(idOf(resource))) throw new Error(`${file}: ${idOf(resource)} is defined twice`);
    seen.add(idOf(resource));
  }
  for (const { path: rel } of k.patches ?? []) {
    const file = path.resolve(dir, rel);
    const patches = readResources(file);
    if (patches.length !== 1) throw new Error(`${file}: a patch file holds one object`);
    const patch = patches[0]!;
    const i = out.findIndex((x) => x.resource.apiVersion === patch.apiVersion && idOf(x.resource) === idOf(patch));
    if (i < 0) throw new Error(`${file}: patches ${patch.apiVersion} ${idOf(patch)}, which ${dir} does not have`);
    const target = out[i]!;
    out[i] = { resource: strategicMerge(target.resource, patch, builtIn(patch.apiVersion)) as Resource, file: target.file };
  }
  if (k.images) out = out.map((x) => ({ ...x, resource: setImages(x.resource, k.images!) }));
  if (k.namespace) {
    const ns = k.namespace;
    out = out.map((x) => (CLUSTER_SCOPED.has(x.resource.kind) ? x : { ...x, resource: { ...x.resource, metadata: { ...x.resource.metadata, namespace: ns } } }));
  }
  return out;
}

/** Kubernetes' own API groups: patched with their merge keys. Custom resources (KEDA) are merged as JSON merge patches: lists are replaced whole. */
export function builtIn(apiVersion: string): boolean {
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
  return !group.includes('.') || group.endsWith('.k8s.io');
}

/** The merge key of a list field in a built-in object, by the field's name and where it is; undefined: the list is replaced. */
function mergeKey(pathKeys: readonly string[]): string | undefined {
  const field = pathKeys[pathKeys.length - 1];
  const inContainer = pathKeys.includes('containers') || pathKeys.includes('initContainers') || pathKeys.includes('ephemeralContainers');
  switch (field) {
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'env':
    case 'volumes':
    case 'imagePullSecrets':
      return 'name';
    case 'volumeMounts':
      return 'mountPath';
    case 'ports':
      return inContainer ? 'containerPort' : 'port';
    case 'topologySpreadConstraints':
      return 'topologyKey';
    default:
      return undefined;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A strategic-merge patch (built-in objects) or a JSON merge patch (custom resources): objects merge, `null` deletes, lists merge by key or are replaced. */
export function strategicMerge(base: unknown, patch: unknown, withMergeKeys: boolean, pathKeys: string[] = []): unknown {
  if (isObject(patch)) {
    const directive = Object.keys(patch).find((k) => k.startsWith('$'));
    if (directive) throw new Error(`patch directive ${directive} (at ${pathKeys.join('.') || 'the root'}) is not supported by this renderer`);
    const out: Record<string, unknown> = isObject(base) ? { ...base } : {};
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = strategicMerge(out[k], v, withMergeKeys, [...pathKeys, k]);
    }
    return out;
  }
  if (Array.isArray(patch)) {
    const key = withMergeKeys ? mergeKey(pathKeys) : undefined;
    if (!key || !Array.isArray(base)) return patch;
    const out = [...base] as unknown[];
    for (const item of patch) {
      const k = isObject(item) ? item[key] : undefined;
      if (k === undefined) throw new Error(`a patch item of ${pathKeys.join('.')} has no ${key} (its merge key)`);
      const i = out.findIndex((x) => isObject(x) && x[key] === k);
      if (i < 0) out.push(item);
      else out[i] = strategicMerge(out[i], item, withMergeKeys, pathKeys);
    }
    return out;
  }
  return patch;
}

/** kustomize's `images`: containers whose image is `name` (with or without a tag) get newName and newTag. */
function setImages(r: Resource, images: NonNullable<Kustomization['images']>): Resource {
  if (!WORKLOADS.has(r.kind)) return r;
  const copy = structuredClone(r);
  const spec = (copy.spec as Record<string, unknown>) ?? {};
  const podSpec = (r.kind === 'CronJob' ? (spec.jobTemplate as { spec: { template: { spec: Record<string, unknown> } } })?.spec?.template?.spec : (spec.template as { spec: Record<string, unknown> })?.spec) ?? {};
  for (const list of ['containers', 'initContainers'] as const) {
    for (const c of (podSpec[list] as { image?: string }[] | undefined) ?? []) {
      if (!c.image) continue;
      const name = c.image.replace(/@.*$/, '').replace(/:[^/:]+$/, '');
      const tag = c.image.slice(name.length).replace(/^:/, '');
      const rule = images.find((i) => i.name === name);
      if (rule) c.image = `${rule.newName ?? name}${rule.newTag ? `:${rule.newTag}` : tag ? `:${tag}` : ''}`;
    }
  }
  return copy;
}
