/** Percentiles of a sample (nearest rank). */
export function summarize(samples: readonly number[]): { n: number; p50: number; p99: number; max: number; mean: number } {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] ?? Number.NaN, mean: s.reduce((a, b) => a + b, 0) / (s.length || 1) };
}

export const fmt = (ms: number): string => (ms < 10 ? ms.toFixed(3) : ms.toFixed(1));
