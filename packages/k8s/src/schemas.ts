import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import ts from 'typescript';
import type { Resource } from './kustomize.ts';

/**
 * Two checks of a resource against the Kubernetes (kubernetes-models 5.1.0) and KEDA
 * (@kubernetes-models/keda 2.0.0) schemas, both offline:
 *
 * - `schemaErrors`: the package's validators, compiled by ajv from the OpenAPI JSON schemas
 *   of the Kubernetes API and of KEDA's CRDs — types, formats, enums, required fields.
 * - `unknownFieldErrors`: those schemas do not forbid fields they do not name (a misspelt
 *   `livenesProbe` passes them, and the API server would drop it without a word), so every
 *   resource is also type-checked by TypeScript as an object literal of the package's
 *   interface for its kind, generated from the same schemas: an excess property is an error.
 */
const MODELS: Record<string, { model: new (data: never) => { validate(): void }; module: string; type: string }> = {
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap', type: 'IConfigMap' },
  'v1/Namespace': { model: Namespace, module: 'kubernetes-models/v1/Namespace', type: 'INamespace' },
  'v1/Secret': { model: Secret, module: 'kubernetes-models/v1/Secret', type: 'ISecret' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1/Service', type: 'IService' },
  'v1/ServiceAccount': { model: ServiceAccount, module: 'kubernetes-models/v1/ServiceAccount', type: 'IServiceAccount' },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' },
  'apps/v1/StatefulSet': { model: StatefulSet, module: 'kubernetes-models/apps/v1/StatefulSet', type: 'IStatefulSet' },
  'batch/v1/Job': { model: Job, module: 'kubernetes-models/batch/v1/Job', type: 'IJob' },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, module: 'kubernetes-models/policy/v1/PodDisruptionBudget', type: 'IPodDisruptionBudget' },
  'keda.sh/v1alpha1/ScaledObject': { model: ScaledObject, module: '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject', type: 'IScaledObject' },
};

const modelOf = (r: Resource) => MODELS[`${r.apiVersion}/${r.kind}`];

/** JSON-schema errors of one resource (ajv, through kubernetes-models); a kind without a schema here is an error too. */
export function schemaErrors(r: Resource): string[] {
  const m = modelOf(r);
  if (!m) return [`no schema for ${r.apiVersion} ${r.kind} (add it to MODELS in packages/k8s/src/schemas.ts)`];
  try {
    new m.model(structuredClone(r) as never).validate();
    return [];
  } catch (err) {
    const e = err as { errors?: { instancePath: string; message?: string; params?: unknown }[]; message: string };
    if (!e.errors) return [e.message];
    return e.errors.map((x) => `${x.instancePath || '/'} ${x.message ?? ''} ${JSON.stringify(x.params ?? {})}`.trim());
  }
}

const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

/**
 * Fields the schemas do not know, for many resources at once (one TypeScript program): for each
 * resource, its label and the compiler's messages (excess properties, and any type error).
 */
export function unknownFieldErrors(resources: readonly { label: string; resource: Resource }[]): Map<string, string[]> {
  const lines: string[] = [];
  const owner: string[] = []; // line (0-based) → label
  const push = (label: string, text: string): void => {
    for (const l of text.split('\n')) {
      lines.push(l);
      owner.push(label);
    }
  };
  const errors = new Map<string, string[]>();
  resources.forEach(({ label, resource }, i) => {
    const m = modelOf(resource);
    if (!m) {
      errors.set(label, [`no TypeScript interface for ${resource.apiVersion} ${resource.kind}`]);
      return;
    }
    push(label, `import type { ${m.type} as T${i} } from '${m.module}';`);
    push(label, `export const r${i}: T${i} = ${JSON.stringify(resource, null, 2)};`);
  });
  const file = path.join(PACKAGE_DIR, 'src', '__manifests__.ts');
  const source = lines.join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
    lib: ['lib.es2022.d.ts'],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) => (path.resolve(name) === file ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => path.resolve(name) === file || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (path.resolve(name) === file ? source : readFile(name));
  // The virtual file is an ES module of this package (type: module).
  const program = ts.createProgram({ rootNames: [file], options, host });
  const sf = program.getSourceFile(file);
  if (!sf) throw new Error('the generated TypeScript file was not loaded');
  for (const d of [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]) {
    const line = d.start === undefined ? 0 : sf.getLineAndCharacterOfPosition(d.start).line;
    const label = owner[line] ?? '(unknown)';
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    errors.set(label, [...(errors.get(label) ?? []), `${text} — at: ${(lines[line] ?? '').trim()}`]);
  }
  return errors;
}
