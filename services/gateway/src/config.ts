import { commonEnv, durationMs, loadConfig } from '@baton/runtime';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** `key:tenant` pairs, comma-separated. Empty: the API runs open (single tenant `default`). */
  BATON_API_KEYS: z
    .string()
    .default('')
    .refine((s) => s === '' || s.split(',').every((p) => /^[^:\s]{16,}:[A-Za-z0-9_-]{1,64}$/.test(p.trim())), 'must be comma-separated key:tenant pairs (keys ≥ 16 characters)'),
  SSE_HEARTBEAT_MS: durationMs(15_000),
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(50 * 1024 * 1024).default(1024 * 1024),
});
export type GatewayConfig = z.infer<typeof schema>;
export const loadGatewayConfig = (env: Record<string, string | undefined>): GatewayConfig => loadConfig('gateway', schema, env);

export function parseApiKeys(s: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const pair of s.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = pair.lastIndexOf(':');
    m.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return m;
}
