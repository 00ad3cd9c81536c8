import { commonEnv, durationMs, loadConfig } from '@baton/runtime';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  /** Standard Webhooks signing secret (`whsec_` + base64 of ≥ 24 random bytes). */
  WEBHOOK_SECRET: z.string().regex(/^whsec_[A-Za-z0-9+/=]{32,}$/, 'must be whsec_ followed by base64 of at least 24 bytes').optional(),
  WEBHOOK_TIMEOUT_MS: durationMs(15_000),
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(12),
  WEBHOOK_BACKOFF_MS: z.string().regex(/^\d+(,\d+)*$/, 'comma-separated milliseconds').default('1000,5000,30000,120000,600000,1800000,3600000'),
  NOTIFIER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
  /** SSRF guard: webhooks may not reach loopback/private/link-local addresses unless this is true. */
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: z.stringbool().default(false),
});
export type NotifierConfig = z.infer<typeof schema>;
export const loadNotifierConfig = (env: Record<string, string | undefined>): NotifierConfig => loadConfig('notifier', schema, env);

/** A fixed secret for local development only; the notifier warns loudly when it is used. */
export const DEV_WEBHOOK_SECRET = 'whsec_YmF0b24tbG9jYWwtZGV2ZWxvcG1lbnQtc2VjcmV0LWRvLW5vdC11c2U=';
