import { readFile } from 'node:fs/promises';

/**
 * Summarise a V8 .cpuprofile (node --cpu-prof): total sampled time, and self time grouped by
 * where the code lives (a package of this repo, a dependency, node's internals, GC, idle) and
 * by function. `BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR" baton bench --only M1`
 * writes one profile per service; `baton cpuprofile DIR/*.cpuprofile` reads them.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  byArea: { area: string; ms: number }[];
  byFunction: { fn: string; ms: number }[];
}

/** Where a frame's code lives: `@baton/<pkg>`, a dependency's name, node, or a V8 pseudo-frame. */
export function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const pkg = /\/(packages|services)\/([^/]+)\/src\//.exec(url);
  if (pkg && !url.includes('node_modules')) return `baton:${pkg[2]}`;
  const dep = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (dep) return dep[1] as string;
  if (url.startsWith('node:')) return 'node';
  return url;
}

export function summarizeProfile(p: Profile, top = 15, skipMs = 0): ProfileSummary {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let at = 0;
  p.samples.forEach((id, i) => {
    const dt = (p.timeDeltas[i] ?? 0) / 1000;
    at += dt;
    if (at >= skipMs) self.set(id, (self.get(id) ?? 0) + dt);
  });
  const area = new Map<string, number>();
  const fns = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, ms] of self) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === '(idle)') {
      idle += ms;
      continue;
    }
    total += ms;
    const a = areaOf(url, functionName);
    area.set(a, (area.get(a) ?? 0) + ms);
    const key = `${functionName || '(anonymous)'} ${a}${url ? `:${lineNumber + 1}` : ''}`;
    fns.set(key, (fns.get(key) ?? 0) + ms);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((x, y) => y[1] - x[1]).slice(0, top);
  return { totalMs: total, idleMs: idle, byArea: sorted(area).map(([a, ms]) => ({ area: a, ms })), byFunction: sorted(fns).map(([fn, ms]) => ({ fn, ms })) };
}

export async function printProfiles(files: readonly string[], opts: { perStep?: number; top?: number; skipMs?: number } = {}): Promise<void> {
  for (const f of files) {
    const s = summarizeProfile(JSON.parse(await readFile(f, 'utf8')) as Profile, opts.top, opts.skipMs);
    const per = (ms: number): string => (opts.perStep ? `${(ms / opts.perStep).toFixed(3)} ms/step` : `${ms.toFixed(0)} ms`);
    console.log(`\n${f}: busy ${per(s.totalMs)} (idle ${s.idleMs.toFixed(0)} ms)`);
    for (const a of s.byArea) console.log(`  ${per(a.ms).padStart(16)}  ${((100 * a.ms) / s.totalMs).toFixed(1).padStart(5)}%  ${a.area}`);
    console.log('  top functions (self time):');
    for (const x of s.byFunction) console.log(`  ${per(x.ms).padStart(16)}  ${x.fn}`);
  }
}
