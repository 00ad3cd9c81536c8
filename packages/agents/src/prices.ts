import type { Usage } from '@baton/domain';

/**
 * Prices in USD per million tokens, kept in one place. A model is matched by the longest
 * prefix (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`); an unknown model costs 0 and is
 * reported as such by `priceOf`.
 */
export interface Price {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

export const PRICES: Readonly<Record<string, Price>> = {
  'claude-opus-4': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-sonnet-4': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-sonnet-4-5': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-haiku-4-5': { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
  'claude-3-5-haiku': { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
};

export function priceOf(model: string): Price | null {
  let best: string | null = null;
  for (const key of Object.keys(PRICES)) if (model.startsWith(key) && (best === null || key.length > best.length)) best = key;
  return best === null ? null : (PRICES[best] ?? null);
}

export function costUsd(model: string, u: Omit<Usage, 'costUsd'>): number {
  const p = priceOf(model);
  if (!p) return 0;
  return (u.inputTokens * p.input + u.outputTokens * p.output + u.cacheReadTokens * p.cacheRead + u.cacheWriteTokens * p.cacheWrite) / 1_000_000;
}
